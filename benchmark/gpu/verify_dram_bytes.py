"""Issue 47's bytes goal on a GPU: the DRAM bytes TARGET_VERIFY's attention reads, as Nsight
Compute counts them, over the bytes of one read of the KV cache. At a Qwen3.5-27B's attention
geometry (24 q heads, 4 KV heads, dim 256, bf16) and deterministic inference's split tile.

Three kernels read the same requests' KV:
- ``verify``: the series' one-read verify kernel, every row of every request;
- ``per-row``: decode's kernel over every verify row, as each row were a request (what
  verify attention did before the one-read kernel: each row reads its prefix);
- ``decode``: decode's kernel over the last row of each request only: one read, measured.

``table`` runs each (context, rows, kernel) case in a process of its own under ``ncu``, which
profiles only the attention's first stage (``stage1`` kernels: the ones that read K and V),
with the caches flushed before it. It prints a markdown table and writes ``ncu-*.csv``.
Before a case's three profiles, a plain run checks that the verify kernel's rows equal the
per-row decode's bitwise. ``case`` is what ``ncu`` runs: one launch of one kernel.

Usage (the GPU machine, from the repository's root; TREE: a tree of the series, ``gdn-parity
tree DIR``):
    PYTHONPATH=python python benchmark/gpu/verify_dram_bytes.py table --tree TREE --out DIR \
        [--contexts 1024,16384,32768] [--rows 2,4] [--batch 16] [--ncu ncu]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HEADS, KV_HEADS, DIM = 24, 4, 256  # a Qwen3.5-27B's full-attention layer
SPLIT_TILE = 256  # deterministic inference's split tile: ceil(n / 256) splits per row
KERNELS = ("verify", "per-row", "decode")
METRICS = {
    "dram__bytes_read.sum": "DRAM read",
    "lts__t_bytes.sum": "L2 traffic",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local loads (spills)",
    "gpu__time_duration.sum": "time",
}
KERNEL_FILTER = "regex:stage1"  # decode's and verify's first stage: the K and V reads


@dataclass(frozen=True)
class Case:
    context: int  # committed tokens per request before the verify
    rows: int  # verify rows per request: gamma + 1
    batch: int

    def kv_bytes(self) -> int:
        """One read of every request's K and V (the longest row's prefix), bf16."""
        return self.batch * (self.context + self.rows) * KV_HEADS * DIM * 2 * 2


@dataclass(frozen=True)
class Counted:
    """What ncu counted over a case's stage1 kernels, summed; None: the metric was absent."""

    launches: int
    values: dict[str, float | None]


def run_case(case: Case, kernel: str, check: bool, device: str) -> None:
    """One launch of ``kernel`` on ``case``'s requests (what ncu profiles)."""
    import torch
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    from sglang.kernels.ops.attention.verify_decode_attention import (
        max_split_groups,
        verify_decode_attention_fwd,
    )

    def splits_of(n: torch.Tensor) -> torch.Tensor:
        return (n + SPLIT_TILE - 1) // SPLIT_TILE

    gen = torch.Generator(device=device).manual_seed(case.context * 16 + case.rows)
    total = case.context + case.rows  # each request's tokens: the prefix and its rows
    slots = case.batch * total + 1  # slot 0 is padding, as in sglang's pools
    k_buf = torch.randn(slots, KV_HEADS, DIM, generator=gen, device=device).bfloat16()
    v_buf = torch.randn(slots, KV_HEADS, DIM, generator=gen, device=device).bfloat16()
    req_to_token = (1 + torch.arange(case.batch * total, dtype=torch.int32, device=device)).view(
        case.batch, total
    )
    req_pool_indices = torch.arange(case.batch, dtype=torch.int64, device=device)
    row_lens = (case.context + torch.arange(1, case.rows + 1, device=device)).repeat(case.batch)
    rows = case.batch * case.rows
    row_indptr = torch.zeros(rows + 1, dtype=torch.int32, device=device)
    row_indptr[1:] = torch.cumsum(row_lens, 0)
    row_splits = splits_of(row_lens).int()
    max_splits = int(row_splits.max())
    q = torch.randn(rows, HEADS, DIM, generator=gen, device=device).bfloat16()
    row_kv = torch.cat(
        [req_to_token[r // case.rows, : int(n)].long() for r, n in enumerate(row_lens.tolist())]
    )
    scale = DIM**-0.5

    def buffers(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (
            torch.empty(n, HEADS, DIM, device=device).bfloat16(),
            torch.empty(n, HEADS, max_splits, DIM, device=device),
            torch.empty(n, HEADS, max_splits, device=device),
        )

    def per_row() -> torch.Tensor:
        out, logits, lse = buffers(rows)
        decode_attention_fwd(
            q, k_buf, v_buf, out, row_indptr, row_kv, logits, lse, row_splits, max_splits,
            scale, 1.0, 1.0, enable_lean=False,
        )  # fmt: skip
        return out

    def verify() -> torch.Tensor:
        out, logits, lse = buffers(rows)
        groups = max_split_groups(splits_of, total, case.rows)
        verify_decode_attention_fwd(
            q, k_buf, v_buf, out, req_to_token, req_pool_indices, row_indptr, row_splits,
            logits, lse, max_splits, case.rows, groups, scale, 1.0, 1.0,
        )  # fmt: skip
        return out

    def decode() -> torch.Tensor:
        last = torch.arange(case.rows - 1, rows, case.rows, device=device)
        lens = row_lens[last]
        indptr = torch.zeros(case.batch + 1, dtype=torch.int32, device=device)
        indptr[1:] = torch.cumsum(lens, 0)
        kv = req_to_token[:, :total].reshape(-1).long()
        out, logits, lse = buffers(case.batch)
        decode_attention_fwd(
            q[last].contiguous(), k_buf, v_buf, out, indptr, kv, logits, lse,
            splits_of(lens).int(), max_splits, scale, 1.0, 1.0, enable_lean=False,
        )  # fmt: skip
        return out

    if check and not torch.equal(verify(), per_row()):
        raise SystemExit(f"{case}: the verify kernel's rows are not decode's")
    {"verify": verify, "per-row": per_row, "decode": decode}[kernel]()
    if device == "cuda":
        torch.cuda.synchronize()


def _number(text: str) -> float | None:
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> Counted:
    """``ncu --csv --page raw`` output: one row per profiled kernel; a units row may follow
    the header. Lines before the header (ncu's ``==PROF==`` notes) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if '"Kernel Name"' in line), None)
    if start is None:
        raise ValueError("no kernel rows: ncu profiled nothing (see its log)")
    rows = list(csv.DictReader(lines[start:]))
    kernels = [r for r in rows if (r.get("ID") or "").strip().isdigit()]
    values: dict[str, float | None] = {}
    for metric in METRICS:
        numbers = [_number(r.get(metric, "")) for r in kernels]
        values[metric] = None if not kernels or None in numbers else sum(numbers)  # type: ignore[arg-type]
    return Counted(launches=len(kernels), values=values)


def _case_argv(args: argparse.Namespace, case: Case, kernel: str) -> list[str]:
    return [
        sys.executable, __file__, "case", "--tree", str(args.tree), "--context",
        str(case.context), "--rows", str(case.rows), "--batch", str(case.batch), "--kernel",
        kernel,
    ]  # fmt: skip


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"{what} failed (exit {proc.returncode}): {tail}")


def profile(args: argparse.Namespace, case: Case, kernel: str) -> Counted:
    log = args.out / f"ncu-{case.context}-{case.rows}-{kernel}.csv"
    ncu = [
        args.ncu, "--csv", "--page", "raw", "--print-units", "base", "--metrics",
        ",".join(METRICS), "--kernel-name", KERNEL_FILTER, "--cache-control", "all",
        "--log-file", str(log),
    ]  # fmt: skip
    _run(ncu + _case_argv(args, case, kernel), f"ncu on {case}, {kernel}")
    return parse_ncu_csv(log.read_text())


def table_row(case: Case, counted: dict[str, Counted]) -> list[str]:
    """A case's cells: each kernel's DRAM reads over one read, verify's spills, the times."""
    one = case.kv_bytes()

    def value(kernel: str, metric: str, scale: float, digits: int) -> str:
        v = counted[kernel].values[metric]
        return "n/a" if v is None else f"{v / scale:.{digits}f}"

    cells = [str(case.context), str(case.rows), str(case.batch), f"{one / 1e6:.1f}"]
    cells += [value(k, "dram__bytes_read.sum", one, 3) for k in KERNELS]
    cells += [value("verify", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", 1e6, 1)]
    cells += [value(k, "gpu__time_duration.sum", 1e3, 1) for k in KERNELS]
    return cells


def table(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    head = ["context", "rows", "batch", "one read (MB)"]
    head += [f"{k}: DRAM read / one read" for k in KERNELS]
    head += ["verify: local loads (MB)", "verify µs", "per-row µs", "decode µs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for context in args.contexts:
        for rows in args.rows:
            case = Case(context, rows, args.batch)
            _run(_case_argv(args, case, "verify") + ["--check"], f"the check of {case}")
            counted = {k: profile(args, case, k) for k in KERNELS}
            cells = table_row(case, counted)
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    (args.out / "verify_dram_bytes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    t = sub.add_parser("table", help="every case under ncu; a markdown table")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--contexts", type=_ints, default=[1024, 16384, 32768])
    t.add_argument("--rows", type=_ints, default=[2, 4])
    t.add_argument("--ncu", default="ncu")
    c = sub.add_parser("case", help="one kernel launch (what ncu runs)")
    c.add_argument("--context", type=int, required=True)
    c.add_argument("--rows", type=int, required=True)
    c.add_argument("--kernel", choices=KERNELS, required=True)
    c.add_argument("--check", action="store_true", help="first check verify's rows are decode's")
    c.add_argument("--device", default="cuda")
    for p in (t, c):
        p.add_argument("--tree", type=Path, required=True)
        p.add_argument("--batch", type=int, default=16)
    args = parser.parse_args(argv)
    if not (args.tree / "python" / "sglang").is_dir():
        parser.error(f"--tree {args.tree}: no python/sglang (a tree of the series)")
    if args.verb == "case":
        from gdn_parity.sandbox.sglang_tree import use_tree

        use_tree(args.tree.resolve(), args.device)  # on cpu: the interpreter, with its fixes
        run_case(Case(args.context, args.rows, args.batch), args.kernel, args.check, args.device)
    else:
        table(args)


if __name__ == "__main__":
    main()
