"""``gdn-parity trace-diff BASE SPEC``: the first GDN state where two state traces part.

Both files are sglang GDN state traces (``SGLANG_GDN_STATE_TRACE``, patch 0001;
the drift demo writes the same format with the same code). A record holds the
digest of one layer's state after ``pos`` absorbed tokens; records align on
``(rid, pos, layer)``. BASE's committed path (its ``decode_input``,
``verify_input`` and ``post_commit`` records) is the reference. Every SPEC
record with a counterpart is compared by sha256, in the order the states come
to exist: at one position, a verify step's snapshot, then the commit, then the
next round's input. A ``verify_step`` whose input token differs from BASE's
token at that position is a rejected draft's snapshot: it has no counterpart
and is skipped.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gdn_parity.errors import GdnParityError

TRACE_FORMAT = "sglang-gdn-state-trace"
COMMITTED = ("decode_input", "verify_input", "post_commit")
# At one position: a step's snapshot exists first, then the commit, then the next input.
ORDER = {"verify_step": 0, "post_commit": 1, "verify_input": 2, "decode_input": 2}


@dataclass(frozen=True)
class Trace:
    path: Path
    header: dict
    records: list[dict]

    @property
    def rids(self) -> list:
        return sorted({r["rid"] for r in self.records}, key=str)

    def describe(self) -> str:
        h = self.header
        flags = ", ".join(f"{k}={v}" for k, v in sorted(h.get("flags", {}).items()))
        return (
            f"{self.path} (sglang {h.get('sglang_version')}, {h.get('model')}, "
            f"ssm {h.get('ssm_dtype')}, conv {h.get('conv_dtype')}; {flags})"
        )


# A state record's fields and their JSON types (sglang's GDNStateTrace writes them so).
_STATE_FIELDS: dict[str, tuple[type, ...]] = {
    "rid": (str, int),
    "pos": (int,),
    "layer": (int,),
    "checkpoint": (str,),
    "ssm": (dict,),
    "conv": (dict,),
}
_OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "step": (int,),
    "token": (int,),
    "token_pos": (int,),
}
_DIGEST_FIELDS: dict[str, tuple[type, ...]] = {"sha256": (str,), "l2": (int, float)}
_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "an object"}


def _json_name(value: object) -> str:
    """The JSON type of a parsed value, as a message names it."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return _JSON_NAMES.get(type(value), "a list")


def _wrong_type(where: str, value: object, types: tuple[type, ...]) -> str | None:
    """Why ``value`` is not of ``types`` (a boolean is no number), or None."""
    if isinstance(value, types) and not isinstance(value, bool):
        return None
    wanted = "a number" if float in types else " or ".join(_JSON_NAMES[t] for t in types)
    return f"has {_json_name(value)} for {where}, not {wanted}"


def _state_problem(record: dict) -> str | None:
    """What makes a ``state`` record unusable, or None."""
    missing = [key for key in _STATE_FIELDS if key not in record]
    if missing:
        return f"lacks {missing}"
    for key, types in (_STATE_FIELDS | _OPTIONAL_FIELDS).items():
        if key in record and (problem := _wrong_type(repr(key), record[key], types)):
            return problem
    if record["checkpoint"] not in ORDER:
        return f"has an unknown checkpoint {record['checkpoint']!r}"
    for state in ("ssm", "conv"):
        absent = [key for key in _DIGEST_FIELDS if key not in record[state]]
        if absent:
            return f"lacks {absent} in its {state} digest"
        for key, types in _DIGEST_FIELDS.items():
            if problem := _wrong_type(f"{state} {key!r}", record[state][key], types):
                return problem
    needs = {"verify_step": {"step", "token", "token_pos"}, "verify_input": {"token", "token_pos"}}
    wanted = needs.get(record["checkpoint"], set()) | (
        {"token_pos"} if "token" in record else set()
    )
    if not wanted <= set(record):
        return f"is a {record['checkpoint']} record without {sorted(wanted - set(record))}"
    return None


def read_trace(path: Path) -> Trace:
    """Parse a trace file (plain or gzip-compressed); a clear error for anything that is not one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GdnParityError(f"cannot read {path}: {exc.strerror}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise GdnParityError(f"{path} is a damaged or truncated gzip file ({exc})") from exc
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise GdnParityError(f"{path} is not a text file, so not a GDN state trace") from exc
    parsed = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            # A cut-off last record, unless the whole file is one line of something else.
            if number == len(lines) and (number > 1 or line.lstrip().startswith("{")):
                why = " (the last line: is the file truncated, or still being written?)"
            elif number == 1:
                why = " (a state trace is the JSONL file that SGLANG_GDN_STATE_TRACE writes)"
            else:
                why = ""
            raise GdnParityError(f"{path}: line {number} is not JSON{why}") from None
        except RecursionError:
            raise GdnParityError(
                f"{path}: line {number} nests deeper than Python's JSON reader goes, so it is "
                "not a trace record"
            ) from None
        except ValueError:  # valid JSON that Python refuses: an integer of over 4,300 digits
            raise GdnParityError(
                f"{path}: line {number} holds a number too long to read, so it is not a trace "
                "record"
            ) from None
        if not isinstance(record, dict):
            raise GdnParityError(f"{path}: line {number} is not a JSON object")
        if parsed and record.get("type") == "state" and (problem := _state_problem(record)):
            raise GdnParityError(f"{path}: line {number} {problem}")
        parsed.append(record)
    if not parsed or parsed[0].get("type") != "header" or parsed[0].get("format") != TRACE_FORMAT:
        raise GdnParityError(f"{path} is not a GDN state trace (no {TRACE_FORMAT} header line)")
    if parsed[0].get("version") != 1:
        raise GdnParityError(f"{path}: trace version {parsed[0].get('version')} is not supported")
    if problem := _wrong_type("'flags'", parsed[0].get("flags", {}), (dict,)):
        raise GdnParityError(f"{path}: line 1 {problem}")
    records = [r for r in parsed[1:] if r.get("type") == "state"]
    return Trace(path, parsed[0], records)


@dataclass(frozen=True)
class Comparison:
    record: dict  # the SPEC record
    base: dict
    ssm_equal: bool
    conv_equal: bool

    @property
    def equal(self) -> bool:
        return self.ssm_equal and self.conv_equal


@dataclass
class Diff:
    rid_pairs: list[tuple]
    compared: list[Comparison] = field(default_factory=list)
    off_path: int = 0  # verify-step snapshots after a draft that is not base's token
    no_counterpart: int = 0
    token_divergence: tuple | None = None  # (rid, position, base token, spec token)

    @property
    def first(self) -> Comparison | None:
        return next((c for c in self.compared if not c.equal), None)

    @property
    def first_committed(self) -> Comparison | None:
        """The first differing state that was committed (not a verify-step snapshot)."""
        return next(
            (c for c in self.compared if not c.equal and c.record["checkpoint"] in COMMITTED),
            None,
        )


def _key(record: dict) -> tuple:
    return record["pos"], ORDER[record["checkpoint"]], record.get("step") or 0, record["layer"]


def _rid_pairs(base: Trace, spec: Trace, rid: str | None) -> list[tuple]:
    if rid is not None:
        pairs = [(r, r) for r in base.rids if str(r) == rid]
        if not pairs or rid not in map(str, spec.rids):
            raise GdnParityError(f"rid {rid!r} is not in both traces")
        return pairs
    shared = [r for r in base.rids if r in spec.rids]
    if shared:
        return [(r, r) for r in shared]
    if len(base.rids) == 1 and len(spec.rids) == 1:
        return [(base.rids[0], spec.rids[0])]
    raise GdnParityError(
        f"the traces share no request id (base: {base.rids}, spec: {spec.rids}); pass --rid, "
        "or trace one request on each server"
    )


def diff_traces(base: Trace, spec: Trace, rid: str | None = None) -> Diff:
    diff = Diff(_rid_pairs(base, spec, rid))
    for base_rid, spec_rid in diff.rid_pairs:
        committed = {}
        tokens = {}
        for r in base.records:
            if r["rid"] != base_rid:
                continue
            if r["checkpoint"] in COMMITTED:
                committed.setdefault((r["pos"], r["layer"]), r)
            if r["checkpoint"] in ("decode_input", "verify_input") and "token" in r:
                tokens[r["token_pos"]] = r["token"]
        records = sorted((r for r in spec.records if r["rid"] == spec_rid), key=_key)
        # A round's rows, by (first position, step): a step is on base's path only if
        # every row up to it is in the trace and is base's token (the check stops at the
        # first row the trace lacks, so a record's ``step`` cannot make it loop on).
        rows = {
            (r["token_pos"] - r["step"], r["step"]): r["token"]
            for r in records
            if r["checkpoint"] == "verify_step"
        }
        for r in records:
            if r["checkpoint"] == "verify_input" and diff.token_divergence is None:
                expected = tokens.get(r["token_pos"])
                if expected is not None and expected != r["token"]:
                    diff.token_divergence = (spec_rid, r["token_pos"], expected, r["token"])
            if r["checkpoint"] == "verify_step":
                start = r["token_pos"] - r["step"]
                if not all(
                    (start, s) in rows and tokens.get(start + s) == rows[start, s]
                    for s in range(r["step"] + 1)
                ):
                    diff.off_path += 1
                    continue
            other = committed.get((r["pos"], r["layer"]))
            if other is None:
                diff.no_counterpart += 1
                continue
            diff.compared.append(
                Comparison(
                    r,
                    other,
                    r["ssm"]["sha256"] == other["ssm"]["sha256"],
                    r["conv"]["sha256"] == other["conv"]["sha256"],
                )
            )
    return diff


def _checkpoint(record: dict) -> str:
    step = record.get("step")
    return record["checkpoint"] + (f"[{step}]" if step is not None else "")


def context_table(diff: Diff, around: Comparison, context: int) -> list[str]:
    """One line per (position, checkpoint) within ``context`` positions of ``around``.

    Each GDN layer gets two marks, SSM then conv: ``=`` equal, ``x`` different. The
    last columns follow the first divergent layer's SSM L2 norm.
    """
    pos, layer = around.record["pos"], around.record["layer"]
    groups: dict[tuple, list[Comparison]] = {}
    for c in diff.compared:
        if abs(c.record["pos"] - pos) <= context:
            groups.setdefault((c.record["rid"], *_key(c.record)[:3]), []).append(c)
    layers = sorted({c.record["layer"] for cs in groups.values() for c in cs})
    title = "layers " + " ".join(map(str, layers))
    lines = [
        f"  {'pos':>5}  {'checkpoint':<16} {title:<{3 * len(layers) + 7}}"
        f"  layer {layer} ssm l2: base / spec"
    ]
    for cs in groups.values():
        by_layer = {c.record["layer"]: c for c in cs}
        marks = " ".join(
            ("=" if by_layer[i].ssm_equal else "x") + ("=" if by_layer[i].conv_equal else "x")
            if i in by_layer
            else "  "
            for i in layers
        )
        ours = by_layer.get(layer)
        norms = f"{ours.base['ssm']['l2']:.8g} / {ours.record['ssm']['l2']:.8g}" if ours else ""
        here = "  <- first" if around in cs else ""
        lines.append(
            f"  {cs[0].record['pos']:>5}  {_checkpoint(cs[0].record):<16} "
            f"{'':7}{marks:<{3 * len(layers)}}  {norms}{here}"
        )
    return lines


def _describe(c: Comparison) -> str:
    r = c.record
    parts = [name for name, eq in (("ssm", c.ssm_equal), ("conv", c.conv_equal)) if not eq]
    verb = "differs" if len(parts) == 1 else "differ"
    return (
        f"pos {r['pos']}, layer {r['layer']}, {_checkpoint(r)}: {' and '.join(parts)} {verb} "
        f"from base's {c.base['checkpoint']} state"
    )


def report(base: Trace, spec: Trace, diff: Diff, context: int = 2) -> Iterable[str]:
    yield f"base: {base.describe()}"
    yield f"spec: {spec.describe()}"
    rids = ", ".join(f"{b}" if b == s else f"{b} ~ {s}" for b, s in diff.rid_pairs)
    yield (
        f"compared {len(diff.compared)} states (rid {rids}); skipped {diff.off_path} verify-step "
        f"snapshots off base's token path (rejected drafts) and {diff.no_counterpart} states "
        "with no base counterpart"
    )
    if diff.token_divergence is not None:
        rid, position, expected, got = diff.token_divergence
        yield f"tokens diverge at position {position}: base {expected}, spec {got} (rid {rid})"
    first = diff.first
    if first is None:
        yield "no divergence: every compared state is bitwise equal"
        return
    yield f"first divergence: {_describe(first)}"
    committed = diff.first_committed
    if committed is not first:
        yield "first committed divergence: " + (_describe(committed) if committed else "none")
    yield from context_table(diff, first, context)
