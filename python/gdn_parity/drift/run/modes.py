"""The demo's decoding modes (no torch here: the worker reads them before importing triton)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

Progress = Callable[[int], None]  # called with the number of newly committed tokens


class ModeKind(StrEnum):
    BASE = "base"  # greedy decode, one token per forward
    FORCED_REJECT = "forced-reject"  # verify rounds that accept no draft
    NATURAL = "natural"  # verify rounds that accept the matching prefix of the drafts


@dataclass(frozen=True)
class Mode:
    kind: ModeKind
    gamma: int = 0
    accept_rate: float = 1.0  # the drafter's, for NATURAL

    @property
    def label(self) -> str:
        if self.kind is ModeKind.BASE:
            return "base"
        if self.kind is ModeKind.FORCED_REJECT:
            return f"forced-reject g={self.gamma}"
        return f"natural g={self.gamma} p={self.accept_rate:g}"

    @classmethod
    def from_dict(cls, raw: dict) -> Mode:
        return cls(ModeKind(raw["kind"]), raw["gamma"], raw["accept_rate"])


def demo_modes(gammas: list[int], natural_gamma: int, accept_rates: list[float]) -> list[Mode]:
    """Forced reject at each gamma, then natural acceptance at each drafter rate."""
    modes = [Mode(ModeKind.FORCED_REJECT, g) for g in gammas]
    return modes + [Mode(ModeKind.NATURAL, natural_gamma, p) for p in accept_rates]
