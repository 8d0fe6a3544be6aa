"""benchmark/gpu/server/jit_cache.sh: the compiled kernels one lease packs and the next unpacks,
and its refusals (exit 2, one line, nothing written)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmark" / "gpu" / "server" / "jit_cache.sh"


def _run(cache: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_CACHE_DIR"}
    if cache is not None:
        env["SGLANG_CACHE_DIR"] = str(cache)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60
    )


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _refused(proc: subprocess.CompletedProcess[str], line_start: str) -> None:
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line_start), proc.stderr


@pytest.fixture
def compiled(tmp_path: Path) -> Path:
    """A server's cache after a start: DeepGEMM's and the CUDA driver's kernels, and Triton's."""
    cache = tmp_path / "cache"
    (cache / "deep_gemm" / "cache" / "kernel.abc").mkdir(parents=True)
    (cache / "deep_gemm" / "cache" / "kernel.abc" / "kernel.cubin").write_bytes(b"\x7fELF sm90a")
    (cache / "nv").mkdir()
    (cache / "nv" / "index").write_bytes(b"ptx jit")
    (cache / "triton").mkdir()
    (cache / "triton" / "big.so").write_bytes(b"triton's own")
    return cache


def test_what_pack_packs_unpack_lays_out(compiled: Path, tmp_path: Path) -> None:
    packed = tmp_path / "jit-cache.tar.xz"
    assert _run(compiled, "pack", str(packed)).returncode == 0
    fresh = tmp_path / "fresh" / "cache"  # a new lease: nothing there yet
    assert _run(fresh, "unpack", str(packed)).returncode == 0
    expected = {k: v for k, v in _files(compiled).items() if not k.startswith("triton/")}
    assert _files(fresh) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "fresh", "jit-cache.tar.xz"]


@pytest.mark.parametrize("held", [(), ("triton",)])
def test_pack_refuses_a_cache_without_kernels_of_its_own(
    tmp_path: Path, held: tuple[str, ...]
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in held:  # Triton's folder alone: nothing pack would keep
        (cache / name).mkdir()
        (cache / name / "k.so").write_bytes(b"x")
    _refused(_run(cache, "pack", str(tmp_path / "out.tar.xz")), "jit_cache.sh: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_pack_refuses_a_folder_as_its_file(compiled: Path, tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _refused(_run(compiled, "pack", str(target)), "jit_cache.sh: ")
    assert list(target.iterdir()) == []


def test_pack_refuses_more_than_a_device_call_returns(compiled: Path, tmp_path: Path) -> None:
    (compiled / "deep_gemm" / "huge.cubin").write_bytes(os.urandom(16 * 2**20))  # xz keeps it
    packed = tmp_path / "jit-cache.tar.xz"
    _refused(_run(compiled, "pack", str(packed)), "jit_cache.sh: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_cache_that_is_a_file_is_refused(compiled: Path, tmp_path: Path) -> None:
    packed = tmp_path / "jit-cache.tar.xz"
    assert _run(compiled, "pack", str(packed)).returncode == 0
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_bytes(b"")
    _refused(_run(not_a_folder, "unpack", str(packed)), "jit_cache.sh: ")
    assert not_a_folder.read_bytes() == b""


@pytest.mark.parametrize("verb", ["pack", "unpack"])
def test_without_sglang_cache_dir(tmp_path: Path, verb: str) -> None:
    _refused(_run(None, verb, str(tmp_path / "x.tar.xz")), "jit_cache.sh: SGLANG_CACHE_DIR")
    assert list(tmp_path.iterdir()) == []


def test_pack_refuses_a_folder_that_is_not_there(compiled: Path, tmp_path: Path) -> None:
    _refused(
        _run(compiled, "pack", str(tmp_path / "no" / "out.tar.xz")), "jit_cache.sh: cannot write"
    )
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("content", [None, b"not a tarball"])
def test_unpack_refuses_what_pack_did_not_write(tmp_path: Path, content: bytes | None) -> None:
    packed = tmp_path / "jit-cache.tar.xz"
    if content is not None:
        packed.write_bytes(content)
    cache = tmp_path / "cache"
    _refused(_run(cache, "unpack", str(packed)), "jit_cache.sh: ")
    assert not cache.exists()


@pytest.mark.parametrize("args", [(), ("pack",), ("copy", "x.tar.xz"), ("pack", "a", "b")])
def test_bad_usage(tmp_path: Path, args: tuple[str, ...]) -> None:
    _refused(_run(tmp_path / "cache", *args), "jit_cache.sh: usage")
    assert list(tmp_path.iterdir()) == []


def test_an_unpack_that_fails_midway_leaves_the_cache_as_it_was(tmp_path: Path) -> None:
    """tar lists a member named ../x, then refuses to write it: nothing reaches the cache."""
    import io
    import tarfile

    packed = tmp_path / "jit-cache.tar.xz"
    with tarfile.open(packed, "w:xz") as tar:
        for name in ("deep_gemm/a.cubin", "../outside"):
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"data"))
    cache = tmp_path / "work" / "cache"
    _refused(_run(cache, "unpack", str(packed)), "jit_cache.sh: could not unpack")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jit-cache.tar.xz"]
