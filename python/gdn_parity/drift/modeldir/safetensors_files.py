"""Tensors into a Hugging Face safetensors checkpoint: one file, or shards and their index.

A checkpoint of at most ``SHARD_BYTES`` is ``model.safetensors``; a larger one is
``model-0000i-of-0000n.safetensors`` files of at most ``SHARD_BYTES`` each (a larger tensor
alone in its own), with ``model.safetensors.index.json`` mapping every tensor to its file, as
sglang's loader reads a sharded checkpoint (``filter_duplicate_safetensors_files``). Each shard
is copied to host memory and written before the next is copied, so host memory holds one
shard: a 27B-shaped checkpoint is drawn on the GPU and never whole on the host.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

SHARD_BYTES = 2 * 2**30
INDEX_NAME = "model.safetensors.index.json"

Tensors = list[tuple[str, torch.Tensor]]  # (name, tensor), in the checkpoint's order


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def plan_shards(tensors: Tensors, shard_bytes: int = SHARD_BYTES) -> list[Tensors]:
    """``tensors`` in order, cut into runs of at most ``shard_bytes`` (a larger tensor alone)."""
    shards: list[Tensors] = [[]]
    size = 0
    for name, tensor in tensors:
        if shards[-1] and size + _nbytes(tensor) > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, tensor))
        size += _nbytes(tensor)
    return shards


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_checkpoint(directory: Path, tensors: Tensors, shard_bytes: int = SHARD_BYTES) -> int:
    """Write ``tensors`` into ``directory`` (which exists) as a safetensors checkpoint; the
    bytes of its tensors."""
    from safetensors.torch import save_file

    mode = 0o666 & ~_umask()  # as open() makes a file: safetensors writes one only we can read
    shards = plan_shards(tensors, shard_bytes)
    files = (
        ["model.safetensors"]
        if len(shards) == 1
        else [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    )
    weight_map = {}
    for file, shard in zip(files, shards, strict=True):
        # copies: the harness's fused tensors' parts are views of one storage, which
        # safetensors refuses to write side by side
        host = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in shard}
        save_file(host, directory / file, metadata={"format": "pt"})
        (directory / file).chmod(mode)
        del host
        weight_map.update(dict.fromkeys((name for name, _ in shard), file))
    total = sum(_nbytes(tensor) for _, tensor in tensors)
    if len(files) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (directory / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
    return total
