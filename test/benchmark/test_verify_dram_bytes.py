"""benchmark/gpu/verify_dram_bytes.py here: how it reads ncu's CSV, the table's ratios, and its
check that the verify kernel's rows are decode's (on CPU, under the Triton interpreter)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmark" / "gpu" / "verify_dram_bytes.py"


def _module():
    spec = importlib.util.spec_from_file_location("verify_dram_bytes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


vdb = _module()
HEADER = (
    '"ID","Process ID","Kernel Name","dram__bytes_read.sum","lts__t_bytes.sum",'
    '"l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","gpu__time_duration.sum"'
)


def test_the_csv_sums_every_profiled_kernel_after_ncus_notes_and_units():
    text = "\n".join([
        "==PROF== Connected to process 4242",
        "==PROF== Profiling \"_verify_rows_grouped_kernel_stage1\": 0%....100% - 9 passes",
        HEADER,
        '"","","","byte","byte","byte","nsecond"',
        '"0","4242","_verify_rows_grouped_kernel_stage1","1,048,576","2,000,000","0","12,345"',
        '"1","4242","_verify_rows_grouped_kernel_stage1","24","100","64","5"',
    ])  # fmt: skip
    counted = vdb.parse_ncu_csv(text)
    assert counted.launches == 2
    assert counted.values["dram__bytes_read.sum"] == 1_048_600
    assert counted.values["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"] == 64
    assert counted.values["gpu__time_duration.sum"] == 12_350


def test_a_metric_ncu_could_not_collect_is_absent_not_zero():
    text = "\n".join([
        HEADER,
        '"0","1","_fwd_grouped_kernel_stage1","n/a","10","0","7"',
    ])  # fmt: skip
    counted = vdb.parse_ncu_csv(text)
    assert counted.values["dram__bytes_read.sum"] is None
    assert counted.values["gpu__time_duration.sum"] == 7


def test_a_log_without_kernels_is_an_error():
    with pytest.raises(ValueError, match="ncu profiled nothing"):
        vdb.parse_ncu_csv("==PROF== Disconnected from process 1\n")


def test_the_row_divides_each_kernels_dram_reads_by_one_read_of_the_kv():
    case = vdb.Case(context=1020, rows=4, batch=16)
    one = 16 * 1024 * 4 * 256 * 2 * 2  # requests x tokens x KV heads x dim x bf16 x (K, V)
    assert case.kv_bytes() == one

    def counted(read: float) -> object:
        values = dict.fromkeys(vdb.METRICS, 1000.0) | {"dram__bytes_read.sum": read}
        return vdb.Counted(launches=1, values=values)

    cells = vdb.table_row(
        case, {"verify": counted(1.05 * one), "per-row": counted(4 * one), "decode": counted(one)}
    )
    assert cells[:7] == ["1020", "4", "16", f"{one / 1e6:.1f}", "1.050", "4.000", "1.000"]


def test_the_check_passes_where_rows_straddle_a_split_length_change(series_tree):
    # 255 + 1 .. 255 + 4: the rows' lengths cross 256, decode's split tile.
    env = os.environ | {"PYTHONPATH": str(ROOT / "python")}
    argv = [
        sys.executable, str(SCRIPT), "case", "--tree", str(series_tree), "--context", "255",
        "--rows", "4", "--batch", "2", "--kernel", "verify", "--check", "--device", "cpu",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
