#!/usr/bin/env bash
# Run on the GPU machine after install.sh and trees.sh: records the machine and the versions a
# server will import in OUTDIR/server-env.txt, and imports what a server loads first (torch on
# the GPU, sgl_kernel's SM90 ops, deep_gemm, and the HTTP server's modules from TREE), so a
# broken install fails here, in seconds, not after a server start. On 2026-12-07 two wheels
# openai needs (sniffio, jiter) were missing, and every server exited while importing.
# Usage: bash benchmark/gpu/server/record_env.sh OUTDIR [TREE]   (TREE: /tmp/srv-trees/series)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:?usage: record_env.sh OUTDIR [TREE]}
tree=${2:-${TREES:-/tmp/srv-trees}/series}
source benchmark/gpu/server/env.sh
mkdir -p "$out"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -n1
  c++ --version | head -n1
  python3 - <<'PY'
import sys
import deep_gemm, sgl_kernel, torch, transformers, triton
torch.cuda.init()
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__,
      "sgl_kernel", getattr(sgl_kernel, "__version__", "?"),
      "deep_gemm", getattr(deep_gemm, "__version__", "?"),
      "transformers", transformers.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(), "sm", torch.cuda.get_device_capability())
PY
  echo "payload $(cat "$SITE/.payload")"
  echo "series digest $(bash benchmark/gpu/series_digest.sh) (benchmark/gpu/series_digest.sh)"
  PYTHONPATH=$tree/python:$PYTHONPATH python3 -c "import sglang.srt.entrypoints.http_server" &&
    echo "sglang.srt.entrypoints.http_server imports from $tree"
} | tee -a "$out/server-env.txt"
