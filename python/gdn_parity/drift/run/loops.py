"""Base greedy decode and DSpark-style verify loops over one request.

A verify round feeds ``[anchor, d_1 .. d_gamma]`` (the anchor is the last
committed token, not yet absorbed), takes the target's argmax of every row,
accepts the longest prefix of drafts that match it, commits that many steps
plus the anchor, and emits the accepted drafts and the bonus (the target's
token after them). Forced reject accepts none, so each round commits exactly
the target's own greedy token: the diagnostic of sglang#35150.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

import torch

from gdn_parity.drift.model.hybrid import HybridModel, Snapshot
from gdn_parity.drift.run.modes import Mode, ModeKind, Progress
from gdn_parity.drift.run.results import RoundDiff


@dataclass
class RunResult:
    mode: Mode
    tokens: list[int]
    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    # Rounds by accepted drafts, grown as sglang's update_spec_correct_drafts_histogram does.
    histogram: list[int] = field(default_factory=list)
    diffs: list[RoundDiff] = field(default_factory=list)


@dataclass
class BaseTrajectory:
    """Base decode's tokens and its persistent state after every absorbed position."""

    prompt_len: int
    tokens: list[int]
    states: dict[int, tuple[torch.Tensor, torch.Tensor]]


class StepObserver(Protocol):
    """Told of every absorbed row: the attribution's recorder (``attribute.tracker``)."""

    def decoded(self, position: int) -> None:
        """Base decode absorbed the row at ``position``."""

    def verified(self, position: int, committed: int, tokens: list[int]) -> None:
        """A verify forward at ``position`` committed ``committed`` rows; ``tokens``: the output
        so far."""


class Drafter(Protocol):
    def propose(self, index: int, gamma: int) -> list[int]:
        """Drafts for output tokens ``index .. index + gamma - 1``."""


class OracleDrafter:
    """Proposes Base's token with probability ``accept_rate``, else a different token."""

    def __init__(self, base_tokens: list[int], accept_rate: float, vocab: int, seed: int):
        self.base = base_tokens
        self.rate = accept_rate
        self.vocab = vocab
        self.rng = random.Random(seed)

    def propose(self, index: int, gamma: int) -> list[int]:
        drafts = []
        for j in range(index, index + gamma):
            target = self.base[j] if j < len(self.base) else 0
            if self.rng.random() < self.rate:
                drafts.append(target)
            else:
                drafts.append((target + 1 + self.rng.randrange(self.vocab - 1)) % self.vocab)
        return drafts


class RandomDrafter:
    """Uniformly random drafts: for forced reject, where no draft is ever accepted."""

    def __init__(self, vocab: int, seed: int):
        self.vocab = vocab
        self.rng = random.Random(seed)

    def propose(self, index: int, gamma: int) -> list[int]:
        return [self.rng.randrange(self.vocab) for _ in range(gamma)]


def _argmax(logits: torch.Tensor) -> list[int]:
    return logits.argmax(dim=-1).tolist()


def prefill(model: HybridModel, prompt: list[int]) -> tuple[Snapshot, int]:
    """Prefill the prompt on a fresh state; return the state after it and the first token."""
    model.clear()
    logits = model.forward(prompt, 0, "prefill")
    return model.snapshot(), _argmax(logits[-1:])[0]


def run_base(
    model: HybridModel,
    start: Snapshot,
    first: int,
    prompt_len: int,
    num_tokens: int,
    progress: Progress,
    exact_parity: bool = False,
    observer: StepObserver | None = None,
) -> BaseTrajectory:
    """Greedy decode; with ``exact_parity`` through the flag's decode kernel, as a
    Base server started with --gdn-verify-exact-parity runs it."""
    model.restore(start)
    tokens, pos = [first], prompt_len
    states = {pos: model.gdn_state()}
    progress(1)
    while len(tokens) < num_tokens:
        logits = model.forward([tokens[-1]], pos, "decode", exact_parity)
        if observer is not None:
            observer.decoded(pos)
        pos += 1
        states[pos] = model.gdn_state()
        tokens.append(_argmax(logits)[0])
        progress(1)
    return BaseTrajectory(prompt_len, tokens, states)


def _state_diff(state, base_state) -> tuple[list[float], list[float]]:
    """Per layer, max |ours - base| of the SSM and of the conv state (one host sync)."""
    ssm, conv = (
        (ours.float() - theirs.float()).abs().flatten(1).amax(1)
        for ours, theirs in zip(state, base_state, strict=True)
    )
    return ssm.tolist(), conv.tolist()


def run_spec(
    model: HybridModel,
    start: Snapshot,
    first: int,
    prompt_len: int,
    mode: Mode,
    num_tokens: int,
    exact_parity: bool,
    drafter: Drafter,
    progress: Progress,
    reference: BaseTrajectory | None = None,
    observer: StepObserver | None = None,
    stop_at_divergence: bool = False,
) -> RunResult:
    """Verify rounds until ``num_tokens`` are emitted; diffs against ``reference`` if given.

    ``stop_at_divergence``: end the run at the round whose tokens leave the reference's.
    """
    model.restore(start)
    result = RunResult(mode, [first])
    anchor, pos = first, prompt_len
    progress(1)
    while len(result.tokens) < num_tokens:
        drafts = drafter.propose(len(result.tokens), mode.gamma)
        target = _argmax(model.forward([anchor, *drafts], pos, "verify", exact_parity))
        correct = 0
        if mode.kind is ModeKind.NATURAL:
            while correct < mode.gamma and drafts[correct] == target[correct]:
                correct += 1
        model.commit(correct)
        emitted = [*drafts[:correct], target[correct]]
        round_pos, anchor, pos = pos, emitted[-1], pos + correct + 1
        result.rounds += 1
        result.proposed += mode.gamma
        result.accepted += correct
        result.histogram.extend([0] * (correct + 1 - len(result.histogram)))
        result.histogram[correct] += 1
        before = len(result.tokens)
        result.tokens.extend(emitted)
        if observer is not None:
            observer.verified(round_pos, correct + 1, result.tokens)
        if reference is not None:
            result.diffs.append(_round_diff(model, reference, result, pos))
        progress(min(len(result.tokens), num_tokens) - before)
        if stop_at_divergence and reference is not None:
            new = result.tokens[before:num_tokens]
            if new != reference.tokens[before : before + len(new)]:
                progress(num_tokens - min(len(result.tokens), num_tokens))  # the bar's share
                break
    result.tokens = result.tokens[:num_tokens]
    return result


def _round_diff(model: HybridModel, base: BaseTrajectory, result: RunResult, pos: int) -> RoundDiff:
    absorbed = pos - base.prompt_len
    on_path = result.tokens[:absorbed] == base.tokens[:absorbed] and pos in base.states
    if on_path:
        ssm, conv = _state_diff(model.gdn_state(), base.states[pos])
    else:
        ssm = conv = [float("nan")] * len(model.c.gdn_layers)
    return RoundDiff(result.rounds, pos, on_path, ssm, conv)
