"""The demo's decoding modes (no torch here: the worker reads them before importing triton)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[int], None]  # called with the number of newly committed tokens


@dataclass(frozen=True)
class Mode:
    kind: str  # "base" | "forced-reject" | "natural"
    gamma: int = 0
    accept_rate: float = 1.0  # the drafter's, for "natural"

    @property
    def label(self) -> str:
        if self.kind == "base":
            return "base"
        if self.kind == "forced-reject":
            return f"forced-reject g={self.gamma}"
        return f"natural g={self.gamma} p={self.accept_rate:g}"


def demo_modes(gammas: list[int], natural_gamma: int, accept_rates: list[float]) -> list[Mode]:
    """Forced reject at each gamma, then natural acceptance at each drafter rate."""
    modes = [Mode("forced-reject", g) for g in gammas]
    return modes + [Mode("natural", natural_gamma, p) for p in accept_rates]
