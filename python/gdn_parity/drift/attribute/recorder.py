"""Digests of the tracked request's rows of every component's output, as the model computes them.

A stack that has a recorder attached calls ``begin`` at the start of each
decode or verify forward and ``tap`` after each component (in the order it
computes them) with a view of the tracked request's rows of that component's
output: the live tensor that the rest of the forward reads. ``flush`` then
returns, per position, the digest of every component's row.

A digest is a 64-bit hash of a row's raw bits (``sum(bits[i] * c[i]) mod 2**64``
with fixed random odd ``c``), computed on the device at ``flush``, one pass per
dtype and one host transfer per forward (a tap only keeps a view). Bitwise equal
rows have equal digests; a change of any one element always changes it (the
change, below 2**32, times an odd coefficient is not 0 mod 2**64); unequal rows
collide with probability about 2**-64.

``perturbations`` is a fault injector for the tests: before a matching tap is
recorded, the first element of that row is moved up by one ulp in place, so the
rest of the forward computes with the perturbed value, as if that component had
computed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gdn_parity.drift.attribute.components import COMPONENTS

PHASES = ("decode", "verify")  # prefill is shared by every mode and not recorded
_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

TapKey = tuple[int, str]  # (layer, component)


@dataclass(frozen=True)
class Perturbation:
    """One ulp up on the first element of one component's row (a test's fault injection)."""

    phase: str
    layer: int
    component: str
    position: int
    row: int | None = None  # the row within the forward (0: a verify's anchor); None: any


def _bit_rows(rows: torch.Tensor | list[torch.Tensor], width: int) -> torch.Tensor:
    """``[width, n]`` integer view of the rows' raw bits (a copy only where not contiguous)."""
    if isinstance(rows, list):
        rows = torch.cat([r.reshape(1, -1) for r in rows])
    flat = rows.reshape(width, -1).contiguous()
    return flat.view(_BITS[flat.element_size()])


def _bump(row: torch.Tensor) -> None:
    first = (0,) * row.dim()
    row[first] = torch.nextafter(row[first], torch.full_like(row[first], float("inf")))


@dataclass
class _Coefficients:
    """Fixed random odd 64-bit coefficients, grown on demand, on the rows' device."""

    values: torch.Tensor | None = None

    def take(self, n: int, device: torch.device) -> torch.Tensor:
        if self.values is None or self.values.numel() < n:
            gen = torch.Generator().manual_seed(0x6D6E)
            drawn = torch.randint(-(2**62), 2**62, (max(n, 1 << 16),), generator=gen)
            self.values = (drawn * 2 + 1).to(device)
        return self.values[:n]


def _group_digests(chunks: list[torch.Tensor], coefficients: _Coefficients) -> torch.Tensor:
    """``[width, len(chunks)]``: chunk ``i``'s row digests, ``sum(bits[j] * c[j])`` over its
    own elements ``j`` (chunks of one integer dtype, digested in one pass)."""
    device = chunks[0].device
    bits = torch.cat(chunks, dim=1).to(torch.int64)
    sizes = torch.tensor([t.shape[1] for t in chunks], device=device)
    ends = sizes.cumsum(0)
    offsets = torch.repeat_interleave(ends - sizes, sizes, output_size=bits.shape[1])
    index = torch.arange(bits.shape[1], device=device) - offsets  # each chunk's own element j
    c = coefficients.take(int(sizes.max()), device)[index]
    sums = (bits * c).cumsum(1).index_select(1, ends - 1)
    return torch.diff(sums, dim=1, prepend=torch.zeros_like(sums[:, :1]))


def digests(chunks: list[torch.Tensor], coefficients: _Coefficients) -> list[list[int]]:
    """Per chunk (``[width, n_i]`` integer bits), the digest of each row: ``[chunk][row]``.

    Chunks are digested by integer dtype, one pass each, and read back in one transfer.
    """
    if not chunks:
        return []
    groups: dict[torch.dtype, list[int]] = {}
    for i, chunk in enumerate(chunks):
        groups.setdefault(chunk.dtype, []).append(i)
    order = [i for members in groups.values() for i in members]
    per_group = [_group_digests([chunks[i] for i in m], coefficients) for m in groups.values()]
    rows = torch.cat(per_group, dim=1).T.tolist()  # in ``order``
    out: list[list[int]] = [[]] * len(chunks)
    for position, i in enumerate(order):
        out[i] = rows[position]
    return out


@dataclass
class ComponentRecorder:
    perturbations: list[Perturbation] = field(default_factory=list)
    _phase: str | None = None
    _start: int = 0
    _width: int = 0
    _keys: list[TapKey] = field(default_factory=list)
    _chunks: list[torch.Tensor] = field(default_factory=list)
    _coefficients: _Coefficients = field(default_factory=_Coefficients)

    @property
    def active(self) -> bool:
        """A decode or verify forward is being recorded."""
        return self._phase is not None

    @property
    def width(self) -> int:
        """The tracked request's rows in the current forward."""
        return self._width

    def begin(self, phase: str, start: int, width: int) -> None:
        """A forward of ``width`` rows of the tracked request at positions ``start...``."""
        self._phase = phase if phase in PHASES else None
        self._start, self._width = start, width
        self._keys, self._chunks = [], []

    def tap(self, layer: int, component: str, rows: torch.Tensor | list[torch.Tensor]) -> None:
        """Record ``rows`` (a view ``[width, ...]`` of the live output, or one tensor per row)."""
        if self._phase is None:
            return
        if component not in COMPONENTS:
            raise ValueError(f"unknown component {component!r}")
        for p in self.perturbations:
            if (p.phase, p.layer, p.component) != (self._phase, layer, component):
                continue
            row = p.position - self._start
            if 0 <= row < self._width and p.row in (None, row):
                _bump(rows[row])
        self._keys.append((layer, component))
        # A view, digested at ``flush``: the forward writes no component's output in place.
        self._chunks.append(_bit_rows(rows, self._width))

    def flush(self) -> dict[int, list[tuple[TapKey, int]]]:
        """The last forward's digests: position -> [(layer, component), digest] in order."""
        per_chunk = digests(self._chunks, self._coefficients)
        out = {
            self._start + row: [(key, d[row]) for key, d in zip(self._keys, per_chunk, strict=True)]
            for row in range(self._width)
        }
        self._phase, self._keys, self._chunks = None, [], []
        return out

    def state(self, layers: list[int], ssm: torch.Tensor, conv: torch.Tensor):
        """Digests of a request's persistent state per GDN layer (``[layers, ...]`` each)."""
        n = len(layers)
        ssm_d, conv_d = digests([_bit_rows(ssm, n), _bit_rows(conv, n)], self._coefficients)
        out: list[tuple[TapKey, int]] = []
        for i, layer in enumerate(layers):
            out += [((layer, "ssm_state"), ssm_d[i]), ((layer, "conv_state"), conv_d[i])]
        return out
