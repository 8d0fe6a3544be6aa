"""What a worker returns for one numerics variant: typed, and JSON on the way between processes.

The worker writes a ``VariantResult`` as JSON; the demo reads it back with
``VariantResult.from_json`` and the table, the figure and the tests read its fields.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from gdn_parity.drift.run.modes import Mode, ModeKind


@dataclass(frozen=True)
class RoundDiff:
    """The committed state after one round against Base's at the same position."""

    round: int
    pos: int
    on_path: bool  # every absorbed token equals Base's, so the states are comparable
    ssm_max: list[float]  # per GDN layer: max |spec - base|; NaN off the path
    conv_max: list[float]

    @property
    def layer_max(self) -> list[float]:
        """Per GDN layer: the larger of its SSM and its conv difference."""
        return [max(s, c) for s, c in zip(self.ssm_max, self.conv_max, strict=True)]

    @property
    def max_diff(self) -> float:
        """The largest SSM or conv difference over every GDN layer (the table's)."""
        return max(self.ssm_max + self.conv_max)


@dataclass(frozen=True)
class Decoded:
    """Base greedy decode's tokens and their sha256 as sglang#35150 hashes them."""

    tokens: list[int]
    sha256: str


@dataclass(frozen=True)
class FirstDifference:
    """The first component output of the tracked request that differs from Base's, bitwise.

    Rows are ordered by position, then by the order the model computes its components;
    the committed GDN state (``ssm_state``/``conv_state``) comes after the last row a
    decode step or a verify commit absorbs.
    """

    output_index: int  # the output token whose logits that row computes
    position: int  # the row's position in the sequence (prompt included)
    row: int  # the row within its verify forward (0: the anchor)
    layer: int  # the model layer; the layer count for final_norm and lm_head
    component: str  # drift.attribute.components.COMPONENTS
    kind: str  # gemm, norm, attention, conv or gdn


@dataclass(frozen=True)
class Attribution:
    """Every committed row on Base's path, compared component by component with Base decode."""

    rows_compared: int
    first: FirstDifference | None  # None: every compared row and state is bitwise Base's

    @classmethod
    def from_dict(cls, raw: dict) -> Attribution:
        first = raw["first"]
        return cls(raw["rows_compared"], FirstDifference(**first) if first else None)


@dataclass(frozen=True)
class ModeResult:
    """One speculative mode's run against the variant's Base decode."""

    label: str
    mode: Mode
    tokens: list[int]
    sha256: str
    rounds: int
    proposed: int
    accepted: int
    histogram: list[int]
    diffs: list[RoundDiff]
    attribution: Attribution | None = None  # with --attribute

    @classmethod
    def from_dict(cls, raw: dict) -> ModeResult:
        fields = dict(raw, mode=Mode.from_dict(raw["mode"]))
        fields["diffs"] = [RoundDiff(**d) for d in raw["diffs"]]
        if raw.get("attribution"):
            fields["attribution"] = Attribution.from_dict(raw["attribution"])
        return cls(**fields)


@dataclass(frozen=True)
class VariantResult:
    variant: str
    exact_parity: bool
    sglang_tree: str
    sglang_version: str
    device: str
    size: str
    ssm_dtype: str
    attention: str
    gdn_layers: list[int]
    prompt_len: int
    base: Decoded
    modes: list[ModeResult]
    traces: dict[str, str]  # mode label -> trace file, when traced
    seconds: float
    stack: str = "rowwise"
    deterministic: bool = False
    requests: int = 1  # the batch (the server stack's; the row-wise stack serves one)
    # The sources of decode/verify difference left as a default server computes them.
    live_sources: list[str] = field(default_factory=list)
    kv_cache_dtype: str = "auto"  # sglang's --kv-cache-dtype (the server stack's KV pool)
    kv_scale: float | None = None  # the attention layers' K/V scale (None: none)

    def mode(self, kind: ModeKind) -> ModeResult:
        """The first mode of ``kind``."""
        return next(m for m in self.modes if m.mode.kind is kind)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> VariantResult:
        fields = dict(raw, base=Decoded(**raw["base"]))
        fields["modes"] = [ModeResult.from_dict(m) for m in raw["modes"]]
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str) -> VariantResult:
        return cls.from_dict(json.loads(text))


def results_json(results: list[VariantResult]) -> str:
    """The demo's results as strict JSON (demo.json): a round off Base's path has no state to
    compare, so its differences, NaN in memory, are null there."""
    return json.dumps(_nan_as_null([r.to_dict() for r in results]), indent=1)


def _nan_as_null(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [_nan_as_null(v) for v in value]
    if isinstance(value, dict):
        return {k: _nan_as_null(v) for k, v in value.items()}
    return value
