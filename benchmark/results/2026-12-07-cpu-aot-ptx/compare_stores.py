"""Every value two PTX files of packed decode's kernel store, compared as expression trees.

Runs the symbolic one-warp simulator of ``../triton38-codegen/ptx_warp_sym.py`` on both
files (the packed decode kernel's parameter order, program (0, 0), state index 0) and
counts the stored output and state elements whose floating-point expression differs.
The simulator's casts are extended to bf16 here. It does not model the shared-memory
transposes of an fp32 state pool (``ldmatrix``/``stmatrix``), so only 2-byte pools are
compared.

usage: compare_stores.py before.ptx after.ptx
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "triton38-codegen"))
import ptx_warp_sym as sym  # noqa: E402


class Warp(sym.Warp):
    def alu(self, op, a, raw):
        if op.startswith("cvt") and "bf16" in op.split("."):
            return sym.node("cvt", op, a[0])
        return super().alu(op, a, raw)

    def exec1(self, op, ops, lanes, raw):
        if op.startswith("cvt.rn.bf16x2.f32"):  # packs as cvt.rn.f16x2.f32 does
            for lane in lanes:
                self.R[ops[0]][lane] = sym.node(
                    "pack", self.val(ops[2], lane), self.val(ops[1], lane)
                )
            return
        return super().exec1(op, ops, lanes, raw)


def stores(path: str) -> dict:
    """(region, byte offset, lane, width) -> the stored value's expression."""
    names = sorted(set(sym.DECODE_PARAMS.values()))
    ids = {n: i + 1 for i, n in enumerate(names)}
    warp = Warp({k: ids[v] for k, v in sym.DECODE_PARAMS.items()}, {9: "scale"})
    by_id = {i: n for n, i in ids.items()}
    warp.region = lambda addr: (by_id.get(addr >> 40, "abs"), addr & ((1 << 40) - 1))
    warp.run(*sym.parse(path))
    return {(reg, off, lane, width): v for _, reg, off, lane, width, v in warp.stores}


def main() -> None:
    before, after = stores(sys.argv[1]), stores(sys.argv[2])
    assert before.keys() == after.keys(), "the two kernels store to different places"
    for region in ("o", "ht"):
        keys = [k for k in before if k[0] == region]
        differ = sum(before[k] != after[k] for k in keys)
        print(f"{region}: {len(keys)} stores, {differ} with another expression")


if __name__ == "__main__":
    main()
