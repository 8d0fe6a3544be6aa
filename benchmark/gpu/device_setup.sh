# Sourced by the device commands: install the carried cp312 wheels into /tmp/site, put the
# sglang wheel into gdn-parity's cache, and record the machine in "$1"/env.txt. A later
# call on the same warm machine may carry nothing: /tmp/site and the cache are kept. A carried
# .gpu/tree.tar.xz (pack_tree.sh) becomes /tmp/gdn-parity-gpu/series where that is missing,
# and the base in the cache where that is (unpack_tree.sh).
# Usage: source benchmark/gpu/device_setup.sh OUTDIR
# A copy carried once stays in the machine's checkout for later calls, so two scripts of one
# call (one sourcing this beside another that does) both install: one at a time (flock), else
# pip's --target replaces a directory the other is writing (2026-12-04: a FileNotFoundError).
if [ -d .gpu/whl ]; then
  flock /tmp/site.lock python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
elif [ ! -d /tmp/site ]; then
  echo "no .gpu/whl carried and no /tmp/site from an earlier call" >&2; exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/python SGLANG_CACHE_DIR=/tmp/sglang-cache PYTHONUNBUFFERED=1
export GDN_PARITY_CACHE=/tmp/gdn-parity-cache PYTHONWARNINGS=ignore
# TRITON=3.8: the triton 3.8 wheel installed at /tmp/t38 (benchmark/README.md), first.
if [ "${TRITON:-}" = 3.8 ]; then
  [ -d /tmp/t38/triton ] || { echo "TRITON=3.8 but /tmp/t38 has no triton (a fresh machine?)" >&2; exit 1; }
  export PYTHONPATH=/tmp/t38:$PYTHONPATH TRITON_CACHE_DIR=/tmp/triton-cache-38
fi
mkdir -p "$GDN_PARITY_CACHE/wheels" "$1"
bash benchmark/gpu/unpack_tree.sh || exit 1
ls .gpu/sglang-0.5.23-*.whl > /dev/null 2>&1 && cp .gpu/sglang-0.5.23-*.whl "$GDN_PARITY_CACHE/wheels/"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} >> "$1/env.txt" 2>&1
