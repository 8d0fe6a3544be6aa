"""Which (context, batch) pairs of a ``cost`` run fit the GPU, and what the others need.

Each pair is one server-stack model of the worker's (``worker.prefilled``), at
``kv_slots`` KV slots per request: its footprint is ``footprint.model_bytes``, whose
KV pool grows with batch x context, with the prefill's activations at one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

from gdn_parity.drift.model.config import ModelConfig
from gdn_parity.drift.model.footprint import GIB, RunHolds, kv_pool_bytes, model_bytes

# sglang's --chunked-prefill-size on a GPU of 60 to 160 GiB, an H100's or H200's
# (srt/arg_groups/memory_hook.py, _handle_gpu_memory_settings)
PREFILL_CHUNK = 8192


def kv_slots(context: int, gammas: list[int]) -> int:
    """A request's KV slots in a cost run: its context, the widest verify's rows, one more."""
    return context + max(gammas) + 2


@dataclass(frozen=True)
class CostMemory:
    """What a cost run's model holds, but for the shape: the widths of its numbers."""

    config: ModelConfig
    dtype_bytes: int  # weights and activations
    ssm_bytes: int  # the SSM pool's element
    kv_bytes: int  # the KV pool's element (1 for FP8)
    gammas: list[int]
    prefill_chunk: int = PREFILL_CHUNK

    def holds(self, context: int, batch: int) -> RunHolds:
        return RunHolds(
            batch,
            max(self.gammas) + 1,
            context=kv_slots(context, self.gammas),
            prefill_rows=min(context, self.prefill_chunk),
            kv_element_bytes=self.kv_bytes,
        )

    def need(self, context: int, batch: int) -> tuple[int, int]:
        """Bytes of GPU memory for ``batch`` requests of ``context`` tokens, and of them the
        KV pool's."""
        holds = self.holds(context, batch)
        return (
            model_bytes(self.config, self.dtype_bytes, self.ssm_bytes, holds),
            kv_pool_bytes(self.config, self.dtype_bytes, holds),
        )


@dataclass(frozen=True)
class Unfit:
    """A (context, batch) the GPU cannot hold."""

    context: int
    batch: int
    need: int  # bytes of GPU memory, all told
    kv: int  # of which the KV pool
    have: int  # the GPU's

    def why(self) -> str:
        return (
            f"needs about {self.need / GIB:.0f} GiB of GPU memory (KV cache "
            f"{self.kv / GIB:.1f} GiB) and the GPU has {self.have / GIB:.0f} GiB"
        )


def unfit(
    memory: CostMemory, contexts: list[int], batches: list[int], gpu_bytes: int
) -> list[Unfit]:
    """The pairs of ``contexts`` x ``batches`` whose model would not fit ``gpu_bytes``."""
    out = []
    for context in contexts:
        for batch in batches:
            need, kv = memory.need(context, batch)
            if need > gpu_bytes:
                out.append(Unfit(context, batch, need, kv, gpu_bytes))
    return out


def refusal(config: ModelConfig, unfits: list[Unfit]) -> str:
    """The one line that refuses a run none of whose pairs fit."""
    if len(unfits) == 1:
        u = unfits[0]
        return (
            f"--size {config.name} at --context {u.context} and --batch {u.batch} {u.why()}: "
            "pass a smaller --context, --batch or --size"
        )
    pairs = "; ".join(
        f"context {u.context} at batch {u.batch} needs about {u.need / GIB:.0f} GiB" for u in unfits
    )
    return (
        f"--size {config.name}: no --context and --batch pair fits the GPU "
        f"({unfits[0].have / GIB:.0f} GiB): {pairs}"
    )


def skip_line(unfits: list[Unfit]) -> str:
    """The warning that names the pairs a run skips, and why."""
    pairs = "; ".join(f"context {u.context} at batch {u.batch} {u.why()}" for u in unfits)
    return f"skipping {len(unfits)} (context, batch) pair(s) that do not fit the GPU: {pairs}"
