# Source on the GPU machine after install.sh: the environment every server and tool of
# benchmark/gpu/server runs in. The site directory goes first on PYTHONPATH, so its torch
# 2.14.1 and triton 3.8 shadow the image's torch 2.11 and triton 3.6; a server's sglang tree
# goes before it (the runner puts <tree>/python there). DeepGEMM stays on, as a user on SM90
# has it; a server whose plan sets SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM=0 keeps the
# batch-invariant GEMMs on Triton.
export SITE=${SITE:-/tmp/srv-site}
export PYTHONPATH=$SITE:$PWD/python
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$SITE/bin:$CUDA_HOME/bin:$PATH   # ninja (a wheel) and nvcc, for sglang's JIT kernels
# torch 2.14.1 links 11 NCCL symbols the image's NCCL 2.28.9 lacks (build_carry.sh).
export LD_PRELOAD=$SITE/lib/libnccl_shim.so${LD_PRELOAD:+:$LD_PRELOAD}
export PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK=1   # built on a newer cuDNN than the image's 9.19
export SGLANG_IS_FLASHINFER_AVAILABLE=false       # not carried: deterministic inference samples with pytorch
export SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=python  # the wheel's Rust tree core is cpython-311 only
export SGLANG_CACHE_DIR=/tmp/sglang-cache TRITON_CACHE_DIR=/tmp/triton-cache-srv
export SGLANG_JIT_CACHE_DIR=$SGLANG_CACHE_DIR/jit  # sglang's JIT kernels, beside DeepGEMM's: jit_cache.sh packs both
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
