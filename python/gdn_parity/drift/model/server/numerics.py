"""What a variant turns on in the server: ``--enable-deterministic-inference`` and the GDN flag."""

from __future__ import annotations

from dataclasses import dataclass

SPLIT_TILE = 256  # SGLANG_TRITON_DECODE_SPLIT_TILE_SIZE's default (deterministic inference)
NUM_KV_SPLITS = 8  # --triton-attention-num-kv-splits' default
SM_COUNT = 132  # get_device_core_count on an H100/H200; the split heuristic reads it


@dataclass(frozen=True)
class ServerNumerics:
    deterministic: bool  # --enable-deterministic-inference
    exact_parity: bool  # --gdn-verify-exact-parity


def enable_batch_invariant_gemms(device: str) -> bool:
    """``ModelRunner.maybe_enable_batch_invariant_mode``: sglang's batch-invariant aten ops.

    They are registered for the CUDA dispatch key and their kernels assert CUDA
    tensors, so on the CPU test bed this does nothing and returns False: torch's
    CPU GEMMs run (bf16 GEMMs there are row-count invariant; see docs/drift-stacks.md).
    """
    if device != "cuda":
        return False
    from sglang.srt.batch_invariant_ops import enable_batch_invariant_mode

    enable_batch_invariant_mode()
    return True
