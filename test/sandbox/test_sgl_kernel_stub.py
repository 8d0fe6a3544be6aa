"""The sgl_kernel stub: any name imports, calling one fails loudly, a real sgl_kernel wins.

On CUDA the server stack's sglang modules import sgl_kernel at module level; the
stub lets them import where it is missing (``sglang_tree.use_tree``), and must
never stand in for a kernel that runs.
"""

from __future__ import annotations

import sys

import pytest

from gdn_parity.sandbox import sgl_kernel_stub


@pytest.fixture
def stub():
    assert "sgl_kernel" not in sys.modules, "the test bed has no sgl_kernel"
    assert sgl_kernel_stub.install()
    yield
    sgl_kernel_stub.uninstall()
    assert "sgl_kernel" not in sys.modules


def test_any_name_imports_and_calling_it_names_it(stub):
    from sgl_kernel import int8_scaled_mm
    from sgl_kernel.scalar_type import scalar_types

    assert {scalar_types.uint4b8: 1}[scalar_types.uint4b8] == 1  # usable as a key, as sglang does
    with pytest.raises(sgl_kernel_stub.AbsentKernel, match="sgl_kernel.int8_scaled_mm was called"):
        int8_scaled_mm(1, 2)
    with pytest.raises(sgl_kernel_stub.AbsentKernel, match=r"scalar_type\.scalar_types\.uint4b8"):
        scalar_types.uint4b8()


def test_an_importable_sgl_kernel_is_not_stubbed(tmp_path, monkeypatch):
    package = tmp_path / "sgl_kernel"
    package.mkdir()
    (package / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert not sgl_kernel_stub.install()
        import sgl_kernel

        assert sgl_kernel.REAL
    finally:
        sys.modules.pop("sgl_kernel", None)
