"""The prompts ``cost --context`` prefills: ``context`` seeded token ids per request."""

from __future__ import annotations

import torch

from gdn_parity.drift.model.server.model import VOCAB_IDS

SEED = 0  # request i's ids come from a torch generator seeded with SEED + i


def context_prompts(prompt: list[int], context: int, requests: int) -> list[list[int]]:
    """``requests`` prompts of ``context`` token ids each. Request 0's first ids are
    ``prompt``'s (the reporter's request, as without ``--context``), the rest drawn; the
    others' are all drawn, each request's from a generator of its own, below ``VOCAB_IDS``.
    The same arguments give the same prompts."""
    prompts = []
    for i in range(requests):
        head = prompt[:context] if i == 0 else []
        generator = torch.Generator().manual_seed(SEED + i)
        drawn = torch.randint(0, VOCAB_IDS, (context - len(head),), generator=generator)
        prompts.append(head + drawn.tolist())
    return prompts
