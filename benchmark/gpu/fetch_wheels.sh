#!/usr/bin/env bash
# Run HERE (a machine with a package index), not on the GPU: fill the git-ignored .gpu/ with
# what the device commands carry. .gpu/whl: the cp312 wheels the GPU image lacks (the demo's,
# then what the server stack imports, docs/drift-stacks.md "On a GPU"); .gpu/: the sglang
# 0.5.23 wheel (from gdn-parity's cache, downloaded there once); .gpu/c50/: the cp312 triton
# 3.8 wheel, sha256-checked, split into 50 MB chunks to carry one per call; .gpu/t38x/: the
# same wheel trimmed to one 52 MB call (trim_triton38.sh; README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu/whl .gpu/c50
cp312=(--only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64
  --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64
  --platform manylinux_2_17_x86_64 --platform any)
pick=("${cp312[@]}" -d .gpu/whl)
# With their dependencies resolved together (pydantic pins its pydantic-core): the demo's,
# then the server stack's serving modules.
python3 -m pip download -q "${pick[@]}" msgspec orjson pybase64 starlette pydantic \
  typing-extensions pyzmq ipython apache-tvm-ffi gguf openai partial-json-parser uvicorn \
  fastapi loguru opentelemetry-api truststore distro
# Without their dependencies, which are heavy and which the image has (torch, pyarrow, ...).
python3 -m pip download -q --no-deps "${pick[@]}" datasets dill multiprocess xxhash \
  compressed-tensors
shopt -s nocaseglob
rm -f .gpu/whl/numpy-* .gpu/whl/pyyaml-* .gpu/whl/tqdm-*  # the image's own
shopt -u nocaseglob
wheel=$(PYTHONPATH=python python3 -c "from gdn_parity.queue.base import fetch_wheel
from gdn_parity.queue.series import load_series
print(fetch_wheel(load_series()))")
cp "$wheel" .gpu/
python3 -m pip download -q --no-deps "${cp312[@]}" -d /tmp/gdn-parity-t38 triton==3.8.0
t38=/tmp/gdn-parity-t38/triton-3.8.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
echo "e91ffa46d095b252248297292dd22bcbacd53a125a0c2eefbbbf74925a320bc3  $t38" | sha256sum -c -
(cd .gpu/c50 && split -b 50M "$t38")
bash benchmark/gpu/trim_triton38.sh "$t38" .gpu/t38x
du -sh .gpu/whl .gpu/*.whl .gpu/c50 .gpu/t38x
