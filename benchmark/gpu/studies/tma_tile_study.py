"""Issue #24's thinnest step row: the wide weights at verify sizes, with TMA loads.

The row: a verify of 64 requests with 3 drafts (256 rows) costs 1.101x the default step in one
run (``results/2026-12-05-h200-splitk-cost.md``), 1.078x (triton 3.6) and 1.094x (3.8) as the
median of three alternating rounds, fastest replay against fastest 1.11-1.15x
(``results/2026-12-05-s20-h200-cost64.md``); the goal is 1.10x. At M = 256, patch 0009's
tiles (pointer loads, one 128 x 128 tile per program) run the 27B's wide weights at
1.13-1.62x cuBLAS on the H200 and 1.32-1.39x on the H100 (down, o_proj, gate_up).
``fixed_split_study.py`` showed that a K split fixed by the weight does not help there, and
that 0009's kernel at other tiles gains at most 4%.

What is left inside 0009's arithmetic (one fp32 accumulator per output element, tl.dot chunks
of K in order from k = 0: ``gemm_study.py`` found every tile and TMA loads give those bits) is
how fast one SM runs a tile. This study times, at the verify sizes above 64 rows:

- ``tma``: one output tile per program, A and W read through TMA descriptors (host-made);
- ``tma-persistent``: one program per SM looping over the tiles (triton's persistent TMA
  matmul, ``tl.range(..., flatten=True)``), and for the 4-warp tiles ``-ws``: the loop not
  flattened and warp-specialized (triton 3.6 specializes those, not the 8-warp ones);

against cuBLAS, the tree's GEMM as batch-invariant mode dispatches it (0009) and the floor.
Every candidate's rows at each M of ``CHECK_M`` are compared with ``torch.equal`` to the first M
rows of the dispatched GEMM at 512 rows (itself the persistent kernel's bits at every M, which
0009's CUDA test checks): a candidate that differs anywhere is reported and not timed.

How it runs, and why: the first run (2026-12-05, H200, triton 3.6: 300 s, no output) printed
and wrote nothing, since all 15 candidates had to pass the first shape's rows before anything
was written: a slow compile and a hung kernel (the warp-specialized ones had never run) look
the same. (Offline for sm_90, every candidate compiles in under 2 s on triton 3.6, and one
warp-specialized kernel's TMA loads look wrong: see ``PERSISTENT_TILES``.) Now the parent
process measures the trusted kernels itself (cuBLAS, the dispatched GEMM, the floor; the
dispatched GEMM's 512 rows go to a temporary directory), then runs each candidate in a child
process of its own (``--candidate LABEL``), one at a time, in the order most likely to win and
least likely to hang: one tile per program, persistent, then warp-specialized. A child checks
its rows and, where they are equal, times the candidate, shape by shape, writing
``cand/<label>.json`` after each step; one that passes ``--candidate-limit`` seconds or crashes
has its process group killed and is recorded as an error at the step it reached (with the end
of its log, ``cand/<label>.log``). No child starts after ``--total-limit`` seconds (those left
are listed as not run), so the parent ends before an outer ``timeout``. It prints a line per
candidate and rewrites the JSON and the summary after every shape of references and every
candidate: a run cut short still leaves what finished.

Usage: python tma_tile_study.py --tree TREE --out DIR [--shapes A,B] [--replays 10]
           [--candidate-limit 45] [--total-limit 270]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # gpu_common
from fixed_split_study import PER_FORWARD as SPLIT_PER_FORWARD  # noqa: E402

import gpu_common  # noqa: E402
from gpu_common import SHAPES, time_kernel  # noqa: E402

# PER_FORWARD's shapes: the summary's estimate for one forward needs every one of them (with
# fewer, --shapes gets no estimate)
STUDY_SHAPES = [
    "27b.down",
    "27b.o_proj",
    "27b.gate_up",
    "27b.qkv_gate",
    "27b.in_proj_qkvz",
    "27b.lm_head",
]
# How many of each GEMM one forward of the 27B runs: fixed_split_study's (in_proj_ba aside), and
# lm_head
PER_FORWARD = {s: n for s, n in SPLIT_PER_FORWARD.items() if s != "27b.in_proj_ba"}
PER_FORWARD["27b.lm_head"] = 1
TIME_M = [128, 192, 256]
CHECK_M = [1, 13, 64, 100, 128, 129, 192, 256, 300, 512]
REFERENCE_M = 512

# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages)
TMA_TILES = [
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 128, 8, 3),
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 256, 64, 4, 3),
]
# The 4-warp tiles (also warp-specialized) last, and 128 x 64 after 64 x 128: triton 3.6 makes
# tma-persistent-ws m128n64k64w4s4 load A's 128 x 64 TMA box in two 64-row halves, each
# expecting 8 KiB of its barrier (PTX expect_tx 8192) where the box brings 16 KiB (offline, sm_90;
# triton 3.8 refuses to compile it): the likeliest hang of the first run
PERSISTENT_TILES = [
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 256, 64, 8, 3),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
]


@triton.jit
def output_tile(a_desc, w_desc, c_ptr, pid_m, pid_n, M, N, K, stride_cm, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """C's tile (pid_m, pid_n) = A @ W^T: K from 0 in BK chunks into one fp32 accumulator."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, ki * BK])
        w = w_desc.load([pid_n * BN, ki * BK])
        acc = tl.dot(a, w.T, acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :],
             acc.to(c_ptr.dtype.element_ty), mask=mask)  # fmt: skip


@triton.jit(do_not_specialize=["M"])  # one compile for every M, as 0009's kernel
def tma_tile_kernel(a_desc, w_desc, c_ptr, M, N, K, stride_cm, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """One tile per program; the M tiles of one N tile are adjacent programs (as 0009's)."""
    output_tile(a_desc, w_desc, c_ptr, tl.program_id(0), tl.program_id(1), M, N, K, stride_cm,
                BM, BN, BK)  # fmt: skip


@triton.jit(do_not_specialize=["M"])
def tma_persistent_kernel(a_desc, w_desc, c_ptr, M, N, K, stride_cm, BM: tl.constexpr,
                          BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr,
                          WARP_SPECIALIZE: tl.constexpr):  # fmt: skip
    """The same tiles, one program per SM looping over them (M tiles of an N tile adjacent)."""
    num_pid_m = tl.cdiv(M, BM)
    num_tiles = num_pid_m * tl.cdiv(N, BN)
    # triton's tutorial 09: Hopper's warp specialization does not work with a flattened loop
    # (with both, triton 3.6 and 3.8 emit the plain kernel's PTX)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=not WARP_SPECIALIZE,
                            warp_specialize=WARP_SPECIALIZE):  # fmt: skip
        output_tile(a_desc, w_desc, c_ptr, tile_id % num_pid_m, tile_id // num_pid_m, M, N, K,
                    stride_cm, BM, BN, BK)  # fmt: skip


Run = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def tma_tile(tile: tuple) -> Run:
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages = tile

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        tma_tile_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
            c, m, n, k, c.stride(0), BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def tma_persistent(tile: tuple, warp_specialize: bool) -> Run:
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages = tile
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def run(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        tma_persistent_kernel[(min(sms, tiles),)](
            TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
            c, m, n, k, c.stride(0), BM=bm, BN=bn, BK=bk, NUM_SMS=sms,
            WARP_SPECIALIZE=warp_specialize, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def name(tile: tuple) -> str:
    return "m{}n{}k{}w{}s{}".format(*tile)


def candidates() -> dict[str, Callable[[], Run]]:
    """Each candidate's label and the maker of its kernel, in the order they run: one tile per
    program (the likeliest winners, and kernels of this kind ran before), persistent, then
    warp-specialized (never run before the first run that printed nothing)."""
    out = {f"tma {name(t)}": partial(tma_tile, t) for t in TMA_TILES}
    for t in PERSISTENT_TILES:
        out[f"tma-persistent {name(t)}"] = partial(tma_persistent, t, False)
    for t in PERSISTENT_TILES:
        if t[3] == 4:  # on triton 3.6 only 4-warp tiles are specialized (8-warp ones are not)
            out[f"tma-persistent-ws {name(t)}"] = partial(tma_persistent, t, True)
    return out


def error(exc: Exception) -> dict:
    return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def timed_or_error(run: Run, x: torch.Tensor, ws: list[torch.Tensor], replays: int) -> dict:
    """``time_kernel``'s result, or the error: one candidate that fails here is recorded."""
    try:
        return time_kernel(run, x, ws, replays)
    except Exception as exc:
        return error(exc)


def rows_differ(run: Run, a: torch.Tensor, w: torch.Tensor, ref: torch.Tensor) -> list[int]:
    return [m for m in CHECK_M if not torch.equal(run(a[:m].contiguous(), w), ref[:m])]


def write(path: Path, text: str) -> None:
    """``path``'s new text, whole or not at all (a write cut by a kill leaves the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The study's limits and a child's arguments, beside ``gpu_common.study_args``'s."""
    p.add_argument(
        "--candidate-limit", type=float, default=45.0, help="seconds one candidate's child may run"
    )
    p.add_argument(
        "--total-limit", type=float, default=270.0, help="seconds after which no child starts"
    )
    p.add_argument("--candidate", help="(child) run this candidate alone, write its JSON")
    p.add_argument("--refs", type=Path, help="(child) the parent's reference rows")


def child_stem(label: str) -> str:
    return label.replace(" ", "_")


def candidate_child(args: argparse.Namespace) -> None:
    """A child: the candidate's rows and, where they are equal, its time, shape by shape;
    ``cand/<label>.json`` is rewritten after each (``bits`` missing: the rows not done)."""
    t0 = time.monotonic()
    run = candidates()[args.candidate]()
    path = args.out / "cand" / f"{child_stem(args.candidate)}.json"
    shapes: dict[str, dict] = {}
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        a, w = gpu_common.linear_operands(REFERENCE_M, n, k)
        ref = torch.load(args.refs / f"{shape}.pt", map_location="cuda")
        entry: dict = {"time": {}}
        shapes[shape] = entry
        try:
            entry["bits"] = rows_differ(run, a, w, ref)
        except Exception as exc:  # a tile that does not compile or launch: recorded
            entry["bits"] = error(exc)
        torch.cuda.synchronize()  # a candidate that broke the context ends the child here
        write(path, json.dumps(shapes, indent=1))
        print(f"[{time.monotonic() - t0:.0f}s] {shape} rows: {entry['bits']}", flush=True)
        if entry["bits"] == []:
            ws = gpu_common.cold_weights(w)
            for m in TIME_M:
                entry["time"][m] = timed_or_error(run, a[:m].contiguous(), ws, args.replays)
                torch.cuda.synchronize()
                write(path, json.dumps(shapes, indent=1))
                took = time.monotonic() - t0
                print(f"[{took:.0f}s] {shape} M = {m}: {entry['time'][m]}", flush=True)
            del ws
        del a, w, ref
        torch.cuda.empty_cache()


def measure_references(
    args: argparse.Namespace, bw: float, refs: Path, result: dict, t0: float
) -> None:
    """Per shape: the dispatched GEMM's rows (against its own 512 rows, which go to ``refs``
    for the children), and cuBLAS, the dispatched GEMM and the floor at each M of TIME_M."""
    bio = gpu_common.tree_batch_invariant_ops(args.tree)
    dispatched = gpu_common.dispatched_gemm(bio)
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        a, w = gpu_common.linear_operands(REFERENCE_M, n, k)
        ref = dispatched(a, w)
        entry: dict = {"N": n, "K": k, "bits": {}, "time": {}}
        entry["bits"]["dispatched"] = rows_differ(dispatched, a, w, ref)
        torch.save(ref.cpu(), refs / f"{shape}.pt")
        ws = gpu_common.cold_weights(w)
        for m in TIME_M:
            x = a[:m].contiguous()
            entry["time"][m] = {
                "floor_us": (n * k * 2 + m * k * 2 + m * n * 2) / bw * 1e6,
                "cublas": time_kernel(torch.nn.functional.linear, x, ws, args.replays),
                "dispatched": time_kernel(dispatched, x, ws, args.replays),
            }
        del a, w, ref, ws
        torch.cuda.empty_cache()
        result["shapes"][shape] = entry
        print(f"[{time.monotonic() - t0:.0f}s] references: {shape}", flush=True)
        save(args.out, result, t0)


def run_child(cmd: list[str], limit: float, log: Path) -> str:
    """``cmd`` in a session of its own (its output to ``log``) for at most ``limit`` seconds:
    "ok", "exit N", "signal N" or "timed out after N s". Whatever is left of its process group
    is killed then (a child stuck in a CUDA kernel or a compile leaves nothing running), and
    also when this process is stopped while it waits (``main``'s SIGTERM handler)."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        left = kill_group(proc)
    if rc is None:
        return f"timed out after {limit:.0f} s{left}"
    return "ok" if rc == 0 else f"exit {rc}" if rc > 0 else f"signal {-rc}"


def kill_group(proc: subprocess.Popen) -> str:
    """Kill ``proc``'s process group: "" once ``proc`` is gone, else a note that it is not."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # nothing left of it
        return ""
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # e.g. stuck in the driver: go on without it
        return " (still there 30 s after SIGKILL)"
    return ""


def log_tail(log: Path, lines: int = 4, chars: int = 400) -> str:
    """The last ``lines`` non-empty lines of a child's log on one line, at most ``chars``."""
    text = log.read_text(errors="replace") if log.exists() else ""
    tail = " | ".join([line.strip() for line in text.splitlines() if line.strip()][-lines:])
    return tail[-chars:] or "no output"


def merge(result: dict, label: str, child: dict, failure: str) -> str | None:
    """A child's rows and times (``cand/<label>.json``) into ``result``'s shapes; where it
    stopped before the end, ``failure`` there as the error. Returns where it stopped, if it did
    (a shape's rows, or its timing at one M)."""
    for shape, entry in result["shapes"].items():
        got = child.get(shape, {})
        if "bits" not in got:
            entry["bits"][label] = {"error": failure}
            return f"{shape} rows"
        entry["bits"][label] = got["bits"]
        if got["bits"] != []:
            continue
        for m, row in entry["time"].items():
            if str(m) not in got["time"]:
                row[label] = {"error": failure}
                return f"{shape} timing at M = {m}"
            row[label] = got["time"][str(m)]
    return None


def child_command(args: argparse.Namespace, label: str, refs: Path) -> list[str]:
    return [
        sys.executable, __file__, "--tree", str(args.tree), "--out", str(args.out),
        "--shapes", args.shapes, "--replays", str(args.replays), "--candidate", label,
        "--refs", str(refs),
    ]  # fmt: skip


def run_candidates(args: argparse.Namespace, refs: Path, result: dict, t0: float) -> None:
    """Each candidate in a child process of its own, one at a time, none started after
    ``--total-limit`` seconds; its outcome in ``result["candidates"]``, its rows and times
    merged into the shapes, the JSON and the summary rewritten after each."""
    status = result["candidates"]
    for label in status:
        left = args.total_limit - (time.monotonic() - t0)
        if left <= 0:
            status[label] = {"outcome": "not run (--total-limit)"}
            continue
        status[label] = {"outcome": "running"}
        save(args.out, result, t0)
        stem = child_stem(label)
        log, path = args.out / "cand" / f"{stem}.log", args.out / "cand" / f"{stem}.json"
        path.unlink(missing_ok=True)
        start = time.monotonic()
        limit = min(args.candidate_limit, left)
        outcome = run_child(child_command(args, label, refs), limit, log)
        if outcome.startswith("timed out") and limit < args.candidate_limit:
            outcome += " (cut at --total-limit)"
        child = json.loads(path.read_text()) if path.exists() else {}
        stopped = merge(result, label, child, f"{outcome}: {log_tail(log)}")
        status[label] = {
            "outcome": outcome,
            "seconds": time.monotonic() - start,
            "stopped_in": stopped,
            "log": str(log.relative_to(args.out)),
        }
        where = f", stopped in {stopped}" if stopped else ""
        took = status[label]["seconds"]
        print(f"[{time.monotonic() - t0:.0f}s] {label}: {took:.0f} s, {outcome}{where}", flush=True)
        save(args.out, result, t0)
    save(args.out, result, t0)  # those not run


def save(out: Path, result: dict, t0: float) -> None:
    result["seconds"] = time.monotonic() - t0
    write(out / "tma_tile_study.json", json.dumps(result, indent=1))
    write(out / "tma_tile_study.md", summary(result))


def main() -> None:
    args = gpu_common.study_args(STUDY_SHAPES, add_arguments)
    (args.out / "cand").mkdir(parents=True, exist_ok=True)
    if args.candidate:
        candidate_child(args)
        return
    t0 = time.monotonic()
    # the outer timeout's SIGTERM: end the running child (run_child's finally) and stop
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    write(args.out / "tma_tile_study.md", "tma_tile_study.py: started, nothing measured yet\n")
    labels = list(candidates())
    print(
        f"shapes: {args.shapes}; {len(labels)} candidates, a child process each, at most "
        f"{args.candidate_limit:.0f} s, none started after {args.total_limit:.0f} s",
        flush=True,
    )
    bw = gpu_common.copy_bandwidth()
    result = {
        "env": gpu_common.gpu_env(copy_bandwidth_TBps=bw / 1e12),
        "limits_s": {"candidate": args.candidate_limit, "total": args.total_limit},
        "candidates": {label: {"outcome": "pending"} for label in labels},
        "shapes": {},
    }
    save(args.out, result, t0)
    with tempfile.TemporaryDirectory(prefix="tma-refs-") as refs:
        measure_references(args, bw, Path(refs), result, t0)
        run_candidates(args, Path(refs), result, t0)
    print(summary(result), flush=True)


def summary(result: dict) -> str:
    """Per shape and M: floor, cuBLAS, the dispatched GEMM, the fastest exact candidate of each
    kind; then one forward's GEMMs; then the candidates whose rows differ or that failed; then
    each candidate's child process."""
    env = result["env"]
    lines = [
        gpu_common.env_line(env),
        "",
        "| shape | M | floor us | cuBLAS us | dispatched us (/ cuBLAS) | fastest exact per kind: "
        "tile us (/ cuBLAS, / dispatched) |",
        "|---|---|---|---|---|---|",
    ]
    other = []
    best_exact: dict[tuple[str, int], float] = {}
    for shape, e in result["shapes"].items():
        other += [f"- {shape}: {lbl}: {b}" for lbl, b in e["bits"].items() if b != []]
        for m, row in e["time"].items():
            cub, disp = row["cublas"]["median_us"], row["dispatched"]["median_us"]
            other += [
                f"- {shape}: {lbl} at M = {m}, timing: {t['error']}"
                for lbl, t in row.items()
                if isinstance(t, dict) and "error" in t
            ]
            best = gpu_common.fastest_per_kind(row, {"cublas", "dispatched"})
            if best:
                best_exact[shape, m] = min(us for us, _ in best.values())
            cells = gpu_common.candidate_cells(best, cub, disp)
            lines.append(
                f"| {shape} | {m} | {row['floor_us']:.1f} | {cub:.1f} | {disp:.1f} "
                f"({disp / cub:.2f}) | {cells or '-'} |"
            )
    forward = gpu_common.forward_estimate(
        result["shapes"], best_exact, PER_FORWARD, TIME_M, "in_proj_ba"
    )
    lines += ["", *forward]
    lines += ["", "Rows that differ from the dispatched GEMM's (M), or errors:"]
    lines += other or ["- none"]
    limits = result["limits_s"]
    lines += [
        "",
        f"Candidates, a child process each (at most {limits['candidate']:.0f} s, none started "
        f"after {limits['total']:.0f} s; {result['seconds']:.0f} s so far):",
    ]
    for label, c in result["candidates"].items():
        took = f", {c['seconds']:.0f} s" if "seconds" in c else ""
        where = f", stopped in {c['stopped_in']}" if c.get("stopped_in") else ""
        lines.append(f"- {label}: {c['outcome']}{took}{where}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
