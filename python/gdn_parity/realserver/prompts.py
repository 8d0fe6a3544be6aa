"""The prompts of a batch: request 0 is sglang#35150's 24 ids, the others seeded and distinct.

Request i's prompt depends on the seed, the length, the id bound and the prompts before it,
so a batch of 4 is the first four requests of a batch of 16, and both servers get the same.
``seeded_prompts`` draws every request, request 0 too (``server-cost``'s long contexts).
"""

from __future__ import annotations

import random

from gdn_parity.debug.issue35150 import INPUT_IDS


def _draw(
    first: int, batch: int, length: int, seed: int, vocab: int, seen: set[tuple[int, ...]]
) -> list[list[int]]:
    """Requests ``first`` to ``batch - 1``: ``length`` ids in ``[0, vocab)`` each, none in
    ``seen`` (a repeat is drawn again from the same request's generator)."""
    prompts = []
    for i in range(first, batch):
        draw = random.Random(f"gdn-parity-server-parity/{seed}/{length}/{vocab}/{i}")
        while (prompt := tuple(draw.randrange(vocab) for _ in range(length))) in seen:
            pass
        seen.add(prompt)
        prompts.append(list(prompt))
    return prompts


def batch_prompts(batch: int, length: int, seed: int, vocab: int) -> list[list[int]]:
    """``batch`` prompts: the issue's ids, then ``length`` ids in ``[0, vocab)`` each, all
    distinct."""
    return [list(INPUT_IDS), *_draw(1, batch, length, seed, vocab, {tuple(INPUT_IDS)})]


def seeded_prompts(batch: int, length: int, seed: int, vocab: int) -> list[list[int]]:
    """``batch`` prompts of ``length`` ids in ``[0, vocab)`` each, all drawn (as
    ``batch_prompts`` draws its others) and distinct."""
    return _draw(0, batch, length, seed, vocab, set())
