"""Print the device calls that carry a real server's parts (build_carry.sh) to the GPU.

A device call carries the checkout (tracked and untracked, not ignored, files) and at most
8 named paths, 64 MiB in all. Each call here carries ``.gpu/srv/SHA256SUMS`` and as many
parts (and extra paths, such as ``.gpu/tree.tar.xz``) as fit beside the checkout; its
command starts with ``receive.sh``. The last call then runs ``install.sh``. Run it here
before spending device time: it refuses a path that no call can carry.

Usage: python3 benchmark/gpu/server/plan_calls.py [EXTRA_PATH ...]
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CALL_LIMIT = 64 * 2**20
MAX_PATHS = 8
SUMS = ".gpu/srv/SHA256SUMS"
RECEIVE = "bash benchmark/gpu/server/receive.sh"


class PlanError(Exception):
    """A path that cannot be carried: the one line to print."""


@dataclass
class Call:
    carry: list[str] = field(default_factory=list)
    size: int = 0

    def fits(self, size: int, limit: int) -> bool:
        return len(self.carry) < MAX_PATHS and self.size + size <= limit


def checkout_size(root: Path) -> int:
    """What every call sends besides its carried paths."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((root / name.decode()).stat().st_size for name in listed if name)


def plan(sizes: dict[str, int], checkout: int, limit: int = CALL_LIMIT) -> list[Call]:
    """Calls in order, each with SHA256SUMS and what fits of ``sizes`` (path -> bytes)."""
    room = limit - checkout - sizes[SUMS]
    calls: list[Call] = []
    for path, size in sizes.items():
        if path == SUMS:
            continue
        if size > room:
            raise PlanError(
                f"{path} ({size / 2**20:.1f} MiB) cannot travel beside a "
                f"{checkout / 2**20:.1f} MiB checkout in one call: rebuild with smaller parts"
            )
        if not calls or not calls[-1].fits(size, room):
            calls.append(Call([SUMS]))
        calls[-1].carry.append(path)
        calls[-1].size += size
    return calls


def carried_paths(root: Path, extra: list[str]) -> dict[str, int]:
    parts = sorted((root / ".gpu" / "srv").glob("part-*"))
    if not (root / SUMS).is_file() or not parts:
        raise PlanError("no parts in .gpu/srv: run benchmark/gpu/server/build_carry.sh first")
    sizes = {SUMS: (root / SUMS).stat().st_size}
    sizes |= {str(p.relative_to(root)): p.stat().st_size for p in parts}
    for path in extra:
        if not (root / path).is_file():
            raise PlanError(f"{path}: no such file under {root}")
        sizes[path] = (root / path).stat().st_size
    return sizes


def main(argv: list[str]) -> int:
    try:
        sizes = carried_paths(ROOT, argv)
        checkout = checkout_size(ROOT)
        calls = plan(sizes, checkout)
    except PlanError as exc:
        print(f"plan_calls.py: {exc}", file=sys.stderr)
        return 2
    print(f"checkout {checkout / 2**20:.1f} MiB; {len(calls)} calls of at most 64 MiB")
    for number, call in enumerate(calls, 1):
        total = (checkout + call.size + sizes[SUMS]) / 2**20
        then = " && bash benchmark/gpu/server/install.sh" if number == len(calls) else ""
        print(f"call {number} ({total:.1f} MiB): carry {call.carry}")
        print(f"  command: {RECEIVE}{then}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
