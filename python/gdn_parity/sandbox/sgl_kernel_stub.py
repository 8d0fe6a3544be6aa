"""An importable ``sgl_kernel`` where none is installed (the drift harness's server stack on CUDA).

On CUDA, sglang's memory pool and attention backends import ``sgl_kernel`` at
module level (through ``srt/layers/quantization``), though the harness's server
stack runs none of its kernels: its GEMMs are torch's or sglang's batch-invariant
Triton ops, its attention, conv, GDN and norm kernels Triton. sglang 0.5.23 pins
``sglang-kernel==0.4.10`` beside torch 2.14.1; a GPU image with another torch
cannot load it. So, where it is missing, ``sgl_kernel`` and every submodule
become stubs: any name imports (as an ``Absent``), and calling it raises
``AbsentKernel`` naming it, so a kernel the harness would really need fails
loudly instead of being skipped. Nothing is stubbed where ``sgl_kernel`` imports.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

PACKAGE = "sgl_kernel"


class AbsentKernel(RuntimeError):
    pass


class Absent:
    """A name from the stubbed ``sgl_kernel``: its attributes are Absent, calling it raises."""

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Absent:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Absent(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise AbsentKernel(
            f"{self._name} was called, but sgl_kernel is not installed (gdn-parity stubs it "
            "on CUDA so that sglang's modules import; the drift harness runs none of its "
            "kernels)"
        )

    def __repr__(self) -> str:
        return f"<absent {self._name}>"

    def __hash__(self) -> int:
        return hash(self._name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Absent) and other._name == self._name


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Absent:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Absent(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == PACKAGE or fullname.startswith(PACKAGE + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_finder: _Finder | None = None


def install() -> bool:
    """Stub ``sgl_kernel`` unless it can be imported; True when the stub is in place."""
    global _finder
    if _finder is not None:
        return True
    if PACKAGE in sys.modules or importlib.util.find_spec(PACKAGE) is not None:
        return False
    _finder = _Finder()
    sys.meta_path.insert(0, _finder)
    return True


def uninstall() -> None:
    """Remove the stub and every stubbed module (the tests' clean-up)."""
    global _finder
    if _finder is None:
        return
    sys.meta_path.remove(_finder)
    _finder = None
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
