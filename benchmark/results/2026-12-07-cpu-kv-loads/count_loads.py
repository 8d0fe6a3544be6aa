"""The K and V elements TARGET_VERIFY's attention loads, counted under the Triton interpreter,
at a Qwen3.5-27B's attention geometry: the one-read kernel against decode's kernel run over
every verify row (what verify did before it, one row per decode row).

Usage (from the repository's root, the project's venv):
    PYTHONPATH=python python benchmark/results/2026-12-07-cpu-kv-loads/count_loads.py TREE
TREE: a tree of the series (``gdn-parity tree DIR``). Prints a markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path

if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "python" / "sglang").is_dir():
    sys.exit("usage: count_loads.py TREE (a tree of the series: gdn-parity tree DIR)")
from gdn_parity.sandbox.sglang_tree import use_tree  # noqa: E402

use_tree(Path(sys.argv[1]).resolve(), "cpu")  # the interpreter, with the test bed's fixes
sys.path.insert(1, str(Path(__file__).resolve().parents[3] / "test"))

import torch  # noqa: E402
from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd  # noqa: E402
from sglang.kernels.ops.attention.verify_decode_attention import (  # noqa: E402
    max_split_groups,
    verify_decode_attention_fwd,
)

from helpers.loads import counted_loads  # noqa: E402

HEADS, KV_HEADS, DIM = 24, 4, 256  # a Qwen3.5-27B's full-attention layer
SPLIT_TILE = 256  # deterministic inference's split: ceil(n / 256) splits
CONTEXTS = (24, 255, 1024, 1535, 4096, 16384, 32768)
ROWS = (2, 4)  # gamma 1 and 3: gamma + 1 verify rows


def splits_of(n: torch.Tensor) -> torch.Tensor:
    return (n + SPLIT_TILE - 1) // SPLIT_TILE


def count(context: int, rows: int) -> tuple[float, float, int]:
    """Element loads over one read of the request's KV: (one-read kernel, decode rows, groups)."""
    gen = torch.Generator().manual_seed(context + rows)
    total = context + rows
    k_buf = torch.randn(total + 1, KV_HEADS, DIM, generator=gen).bfloat16()
    v_buf = torch.randn(total + 1, KV_HEADS, DIM, generator=gen).bfloat16()
    req_to_token = (torch.arange(total, dtype=torch.int32) + 1)[None, :]
    req_pool_indices = torch.zeros(1, dtype=torch.int64)
    lens = context + torch.arange(1, rows + 1)
    indptr = torch.zeros(rows + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(lens, 0)
    splits = splits_of(lens).int()
    max_splits = int(splits.max())
    q = torch.randn(rows, HEADS, DIM, generator=gen).bfloat16()

    def buffers():
        return (
            torch.empty(rows, HEADS, DIM).bfloat16(),
            torch.empty(rows, HEADS, max_splits, DIM),
            torch.empty(rows, HEADS, max_splits),
        )

    kv_indices = torch.cat([req_to_token[0, : int(n)].long() for n in lens])
    with counted_loads(k_buf) as decode:
        out, logits, lse = buffers()
        decode_attention_fwd(
            q, k_buf, v_buf, out, indptr, kv_indices, logits, lse, splits, max_splits,
            DIM**-0.5, 1.0, 1.0, enable_lean=False,
        )  # fmt: skip
    groups = max_split_groups(splits_of, total, rows)
    with counted_loads(k_buf) as verify:
        v_out, logits, lse = buffers()
        verify_decode_attention_fwd(
            q, k_buf, v_buf, v_out, req_to_token, req_pool_indices, indptr, splits, logits,
            lse, max_splits, rows, groups, DIM**-0.5, 1.0, 1.0,
        )  # fmt: skip
    if not torch.equal(v_out, out):
        raise SystemExit(f"context {context}, {rows} rows: the kernel's rows are not decode's")
    one_read = total * KV_HEADS * DIM
    return verify[0].elements / one_read, decode[0].elements / one_read, groups


def main() -> None:
    columns = (
        "context", "verify rows", "one read of K (MB)", "one-read kernel", "decode per row",
        "launch bound on split groups",
    )  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for context in CONTEXTS:
        for rows in ROWS:
            kernel, per_row, groups = count(context, rows)
            mb = (context + rows) * KV_HEADS * DIM * 2 / 1e6
            print(f"| {context} | {rows} | {mb:.2f} | {kernel:.3f} | {per_row:.3f} | {groups} |")


if __name__ == "__main__":
    main()
