"""Compare a verify run with Base decode component by component, and find the first difference.

``Attributor`` is the loops' ``StepObserver``: during Base decode it keeps, per
position, the digest of every component's output of the tracked request's row
and of its committed GDN state; during a speculative mode it compares every
committed row (the anchor and the accepted drafts) and the state after each
commit with Base's at the same position, for as long as the tokens absorbed so
far are Base's. The first differing (position, component in compute order) is
the mode's ``Attribution``.
"""

from __future__ import annotations

from typing import Protocol

import torch

from gdn_parity.drift.attribute.components import COMPONENTS
from gdn_parity.drift.attribute.recorder import ComponentRecorder, TapKey
from gdn_parity.drift.run.results import Attribution, FirstDifference

Digests = list[tuple[TapKey, int]]


class Recordable(Protocol):
    """What both stacks offer the attribution (HybridModel, ServerModel)."""

    c: object  # ModelConfig: .layers, .gdn_layers

    def attach_probe(self, probe: ComponentRecorder | None) -> None: ...

    def gdn_state(self) -> tuple[torch.Tensor, torch.Tensor]: ...


class Attributor:
    def __init__(self, model: Recordable, prompt_len: int):
        self.model = model
        self.prompt_len = prompt_len
        self.recorder = ComponentRecorder()
        self.base_rows: dict[int, Digests] = {}
        self.base_states: dict[int, Digests] = {}  # after absorbing the row at that position
        self.start_mode([])

    def __enter__(self) -> Attributor:
        self.model.attach_probe(self.recorder)
        return self

    def __exit__(self, *exc) -> None:
        self.model.attach_probe(None)

    def _state(self) -> Digests:
        ssm, conv = self.model.gdn_state()
        return self.recorder.state(self.model.c.gdn_layers, ssm, conv)

    # -- the loops' StepObserver ---------------------------------------------------------

    def decoded(self, position: int) -> None:
        """Base decode just absorbed the row at ``position``."""
        self.base_rows[position] = self.recorder.flush()[position]
        self.base_states[position] = self._state()

    def start_mode(self, base_tokens: list[int]) -> None:
        self.base_tokens = base_tokens
        self.rows_compared = 0
        self.first: FirstDifference | None = None
        self.stopped = False

    def verified(self, position: int, committed: int, tokens: list[int]) -> None:
        """A verify forward at ``position`` committed its first ``committed`` rows; ``tokens``
        is the run's output so far."""
        rows = self.recorder.flush()
        if self.stopped:
            return
        for row in range(committed):
            pos = position + row
            absorbed = pos - self.prompt_len + 1  # output tokens fed through this row
            if tokens[:absorbed] != self.base_tokens[:absorbed] or pos not in self.base_rows:
                self.stopped = True  # off Base's path: nothing further is comparable
                return
            self.rows_compared += 1
            pairs = [(rows[pos], self.base_rows[pos])]
            if row == committed - 1:
                pairs.append((self._state(), self.base_states[pos]))
            for ours, theirs in pairs:
                found = self._first_difference(ours, theirs, pos, row)
                if found is not None:
                    self.first, self.stopped = found, True
                    return

    def result(self) -> Attribution:
        return Attribution(self.rows_compared, self.first)

    def _first_difference(
        self, ours: Digests, theirs: Digests, position: int, row: int
    ) -> FirstDifference | None:
        if [key for key, _ in ours] != [key for key, _ in theirs]:
            raise RuntimeError(f"verify and decode recorded different components at {position}")
        for ((layer, component), mine), (_, base) in zip(ours, theirs, strict=True):
            if mine != base:
                return FirstDifference(
                    output_index=position - self.prompt_len + 1,
                    position=position,
                    row=row,
                    layer=layer,
                    component=component,
                    kind=str(COMPONENTS[component]),
                )
        return None
