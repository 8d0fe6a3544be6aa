"""``gdn-parity repro``: replay sglang#35150's experiment against a Base and a speculative server.

The same greedy request (by default the issue's 24 input ids, 96 new tokens,
``ignore_eos``) goes to both servers, ``repeats`` times, with the same ``rid``
per repeat so that their GDN state traces align. The outputs are hashed as the
issue hashes them and compared token by token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.debug.issue35150 import INPUT_IDS, INPUT_SHA256
from gdn_parity.debug.sglang_client import Generation, generate, greedy_payload
from gdn_parity.debug.tokens import first_divergence, ids_sha256
from gdn_parity.errors import GdnParityError


def load_input_ids(path: Path | None) -> list[int]:
    """The issue's ids, or a file's: a JSON list, or integers separated by commas or spaces."""
    if path is None:
        if ids_sha256(INPUT_IDS) != INPUT_SHA256:
            raise GdnParityError("the embedded input ids no longer hash to the issue's sha256")
        return list(INPUT_IDS)
    try:
        text = path.read_text()
    except OSError as exc:
        raise GdnParityError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise GdnParityError(f"{path} is not a text file of token ids") from exc
    try:
        if text.lstrip().startswith("["):
            ids = json.loads(text)
            if not isinstance(ids, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in ids
            ):
                raise ValueError("not a JSON list of integers")
        else:
            ids = [int(i) for i in text.replace(",", " ").split()]
    except ValueError as exc:
        raise GdnParityError(f"{path} is not a list of token ids") from exc
    if not ids or any(i < 0 for i in ids):
        raise GdnParityError(f"{path} holds no token ids, or negative ones")
    return ids


@dataclass(frozen=True)
class Repro:
    input_ids: list[int]
    base: list[Generation]
    spec: list[Generation]


def run_repro(
    base_url: str,
    spec_url: str,
    input_ids: list[int],
    max_new_tokens: int,
    repeats: int,
    timeout: float,
    rid: str,
) -> Repro:
    base, spec = [], []
    for i in range(repeats):
        payload = greedy_payload(input_ids, max_new_tokens, f"{rid}-{i}")
        base.append(generate(base_url, payload, timeout))
        spec.append(generate(spec_url, payload, timeout))
    return Repro(input_ids, base, spec)


def _token_at(ids: list[int], index: int) -> int | str:
    return ids[index] if index < len(ids) else "(end)"


def _side(name: str, url: str, runs: list[Generation]) -> Iterable[str]:
    shas = [ids_sha256(g.output_ids) for g in runs]
    repeat = "" if len(runs) == 1 else f" ({len(set(shas))} distinct output(s) in {len(runs)} runs)"
    yield f"{name}: {url}: output sha256 {shas[0]} ({len(runs[0].output_ids)} tokens){repeat}"


def report(repro: Repro, base_url: str, spec_url: str) -> tuple[list[str], bool]:
    """The printed lines and whether the speculative outputs equal the Base outputs."""
    sha = ids_sha256(repro.input_ids)
    known = " (sglang#35150's request)" if sha == INPUT_SHA256 else ""
    lines = [f"input: {len(repro.input_ids)} ids, sha256 {sha}{known}"]
    lines += _side("base", base_url, repro.base)
    lines += _side("spec", spec_url, repro.spec)
    identical = True
    for i, (b, s) in enumerate(zip(repro.base, repro.spec, strict=True)):
        index = first_divergence(b.output_ids, s.output_ids)
        run = f"run {i}: " if len(repro.base) > 1 else ""
        if index is None:
            lines.append(f"{run}identical: spec equals base for all {len(b.output_ids)} tokens")
            continue
        identical = False
        lines.append(
            f"{run}first divergence: output index {index}: base {_token_at(b.output_ids, index)}, "
            f"spec {_token_at(s.output_ids, index)}; indices 0..{index - 1} match"
        )
    metrics = repro.spec[-1].spec_metrics
    if metrics:
        lines.append("spec metrics: " + " ".join(f"{k}={v}" for k, v in metrics.items()))
    else:
        lines.append("spec metrics: none in meta_info (is the server speculative?)")
    return lines, identical
