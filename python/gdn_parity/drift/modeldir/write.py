"""Write a model directory: ``target/`` (config and, unless asked not to, the seeded weights)
and ``draft/`` (config only), all at once or not at all.

Only the weights need torch (imported when they are written): the configs alone are written
where the ``[demo]`` extra is not installed.

Everything is written into a staging directory beside the first directory of ``out`` that does
not exist yet (``out`` itself, or a parent to be made), then renamed into place: an error or an
interrupt leaves nothing behind, and ``out`` never holds half a checkpoint.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.drift.model.config import SIZES, ModelConfig
from gdn_parity.drift.modeldir.configs import draft_config, target_config

# Half the smallest GPU machine's disk (64 GiB). 27b-8l's checkpoint (11 GB) is written; the
# 64-layer 27B's (54 GB) would fill most of that disk, and identity runs use 27b-8l.
MAX_CHECKPOINT_BYTES = 32 * 2**30


def checkpoint_bytes(c: ModelConfig) -> int:
    """The checkpoint's size before drawing it: every parameter in bfloat16, ``A_log`` in
    float32."""
    a_log = c.gdn_v_heads * len(c.gdn_layers)
    return 2 * c.parameters() + 2 * a_log


@dataclass(frozen=True)
class ModelDirPlan:
    """``gdn-parity model-dir``'s request: harness ``size`` into ``out``, the draft drafting
    ``gamma`` tokens, the weights drawn on ``device`` unless ``weights`` is false."""

    size: str
    out: Path
    gamma: int
    device: str
    weights: bool


@dataclass(frozen=True)
class ModelDir:
    """What was written: the two model paths and the checkpoint's bytes (0: configs only)."""

    target: Path
    draft: Path
    weight_bytes: int


def _anchor(out: Path) -> Path:
    """The directory the rename puts in place: the topmost directory of ``out``'s path that
    does not exist yet, else ``out`` (an existing empty directory, which the rename replaces)."""
    anchor = out
    while not anchor.parent.exists():
        anchor = anchor.parent
    return anchor


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def _write_weights(plan: ModelDirPlan, target: Path) -> int:
    from gdn_parity.drift.model.weights import make_weights
    from gdn_parity.drift.modeldir.checkpoint import checkpoint_tensors
    from gdn_parity.drift.modeldir.safetensors_files import write_checkpoint

    weights = make_weights(SIZES[plan.size], plan.device)
    return write_checkpoint(target, checkpoint_tensors(weights))


def write_model_dir(plan: ModelDirPlan) -> ModelDir:
    """Write ``plan``'s model directory (``plan_problem`` found nothing wrong with it)."""
    config = SIZES[plan.size]
    out = plan.out.absolute()
    anchor = _anchor(out)
    staging = Path(tempfile.mkdtemp(prefix=f".{anchor.name}.", dir=anchor.parent))
    try:
        staged = staging / anchor.name / out.relative_to(anchor)
        (staged / "target").mkdir(parents=True)
        (staged / "draft").mkdir()
        _write_json(staged / "target" / "config.json", target_config(config))
        _write_json(staged / "draft" / "config.json", draft_config(config, plan.gamma))
        written = _write_weights(plan, staged / "target") if plan.weights else 0
        (staging / anchor.name).rename(anchor)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ModelDir(target=out / "target", draft=out / "draft", weight_bytes=written)


def plan_problem(plan: ModelDirPlan) -> str | None:
    """Why ``plan`` cannot be written, or None: ``out`` holds something already, or the
    weights are too large to write or must be drawn on a GPU that ``device`` is not."""
    config = SIZES[plan.size]
    if plan.out.exists() and not (plan.out.is_dir() and not any(plan.out.iterdir())):
        return f"{plan.out} exists and is not an empty directory: remove it, or name another"
    if not plan.weights:
        return None
    size = checkpoint_bytes(config)
    if size > MAX_CHECKPOINT_BYTES:
        return (
            f"{plan.size}'s checkpoint would be {size / 1e9:.0f} GB, over the "
            f"{MAX_CHECKPOINT_BYTES / 2**30:.0f} GiB a model directory may hold: pass "
            "--no-weights and serve it with --load-format dummy (for cost only: its greedy "
            "output is one token repeated; identity runs use 27b-8l)"
        )
    if config.gpu_only and plan.device != "cuda":
        return (
            f"{plan.size}'s weights are drawn on the GPU, as the harness draws them "
            f"({size / 1e9:.0f} GB): pass --device cuda on a machine with one, or --no-weights"
        )
    return None
