"""The batch sizes sglang captures CUDA graphs at, and so the size a batch is padded to.

``generate_decode_cuda_graph_batch_sizes`` (``srt/arg_groups/cuda_graph_hook.py``)
captures, up to 256 requests: ``[1, 2, 4, 8, 12]`` then every 8th size for a
server without speculative decoding (the Base server's decode graphs), and
``1..8``, every 2nd to 32, every 4th to 64, every 8th to 256 for a speculative
server, whose graphs run TARGET_VERIFY. A batch runs the smallest graph that
holds it, the rows past its requests padded.
"""

from __future__ import annotations

MAX_BATCH = 256  # both lists continue past it with steps that depend on --max-running-requests
DECODE_GRAPH_SIZES = (1, 2, 4, 8, 12, *range(16, MAX_BATCH + 1, 8))
VERIFY_GRAPH_SIZES = (
    *range(1, 9),
    *range(10, 33, 2),
    *range(40, 65, 4),
    *range(72, MAX_BATCH + 1, 8),
)


def padded_batch(requests: int, phase: str) -> int:
    """The graph batch size a ``phase`` ("decode" or "verify") batch of ``requests`` runs at."""
    if not 1 <= requests <= MAX_BATCH:
        raise ValueError(f"a batch holds 1 to {MAX_BATCH} requests, not {requests}")
    sizes = DECODE_GRAPH_SIZES if phase == "decode" else VERIFY_GRAPH_SIZES
    return next(bs for bs in sizes if bs >= requests)
