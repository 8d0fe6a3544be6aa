"""``gdn-parity model-dir``: what it writes, the checkpoint files, and what it refuses.

Whether sglang's own config classes and loader read what it writes is
``test_model_dir_loads.py`` (it needs the tree).
"""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.model.weights import make_weights
from gdn_parity.drift.modeldir import write as modeldir_write
from gdn_parity.drift.modeldir.checkpoint import checkpoint_tensors
from gdn_parity.drift.modeldir.safetensors_files import INDEX_NAME, write_checkpoint
from gdn_parity.drift.modeldir.write import ModelDirPlan, checkpoint_bytes, write_model_dir
from helpers.cli import assert_refused, sigint_as_a_terminal

# Whether torch sees a CUDA device (the test bed has none: a refusal below is for that).
CUDA = torch.cuda.is_available()


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by its relative path, with its bytes; directories too."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(root.rglob("*"))
    }


def test_tiny_writes_both_configs_and_one_checkpoint_file(tmp_path, run_cli):
    out = tmp_path / "models" / "tiny"  # its parent is made too
    proc = run_cli("model-dir", "tiny", str(out), "--gamma", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert sorted(_tree(tmp_path)) == [
        "models",
        "models/tiny",
        "models/tiny/draft",
        "models/tiny/draft/config.json",
        "models/tiny/target",
        "models/tiny/target/config.json",
        "models/tiny/target/model.safetensors",
    ]  # nothing staged beside it is left
    assert json.loads((out / "draft" / "config.json").read_text())["block_size"] == 1
    target = json.loads((out / "target" / "config.json").read_text())
    assert target["architectures"] == ["Qwen3_5ForCausalLM"]
    assert proc.stdout == (
        f"wrote {out}/target (config, 0.06 GB of seeded weights) and {out}/draft (config)\n"
    )
    mode = (out / "target" / "model.safetensors").stat().st_mode & 0o777
    assert mode == (out / "target" / "config.json").stat().st_mode & 0o777  # not 0600


def test_no_weights_writes_the_configs_alone_even_for_the_27b(tmp_path, run_cli):
    out = tmp_path / "27b"
    out.mkdir()  # an empty directory is filled
    proc = run_cli("model-dir", "27b", str(out), "--no-weights")
    assert proc.returncode == 0, proc.stderr
    assert sorted(_tree(tmp_path)) == [
        "27b", "27b/draft", "27b/draft/config.json", "27b/target", "27b/target/config.json",
    ]  # fmt: skip
    assert "no weights (serve it with --load-format dummy)" in proc.stdout


def test_the_checkpoint_holds_the_seeded_weights_under_their_names(tmp_path):
    """Read back with safetensors itself: every name once, each tensor the harness's (the
    norms a Gemma norm multiplies by one plus are stored less one), A_log in float32, and the
    bytes the writer counts before drawing anything."""
    c = SIZES["tiny"]
    out = tmp_path / "m"
    written = write_model_dir(ModelDirPlan("tiny", out, gamma=3, device="cpu", weights=True))
    w = make_weights(c, "cpu")
    with safe_open(out / "target" / "model.safetensors", framework="pt") as f:
        stored = {name: f.get_tensor(name) for name in f.keys()}
    gdn, attention = w.layers[0].mixer, w.layers[3].mixer
    expected = {
        "model.embed_tokens.weight": w.embed,
        "lm_head.weight": w.lm_head,
        "model.norm.weight": w.final_norm - 1,
        "model.layers.0.linear_attn.in_proj_qkv.weight": gdn.qkvz[: c.qkv_dim],
        "model.layers.0.linear_attn.in_proj_z.weight": gdn.qkvz[c.qkv_dim :],
        "model.layers.0.linear_attn.in_proj_b.weight": gdn.ba[: c.gdn_v_heads],
        "model.layers.0.linear_attn.in_proj_a.weight": gdn.ba[c.gdn_v_heads :],
        "model.layers.0.linear_attn.conv1d.weight": gdn.conv[:, None, :],
        "model.layers.0.linear_attn.A_log": gdn.A_log,
        "model.layers.0.linear_attn.norm.weight": gdn.norm,
        "model.layers.0.input_layernorm.weight": w.layers[0].input_norm - 1,
        "model.layers.3.self_attn.q_proj.weight": attention.qkv[: c.attn_q_dim],
        "model.layers.3.self_attn.k_norm.weight": attention.k_norm - 1,
        "model.layers.3.mlp.up_proj.weight": w.layers[3].gate_up[c.intermediate :],
    }
    for name, tensor in expected.items():
        assert stored[name].dtype == tensor.dtype, name
        assert torch.equal(stored[name], tensor), name
    assert stored["model.layers.0.linear_attn.A_log"].dtype == torch.float32
    assert len(stored) == 2 + 1 + 3 * 14 + 11  # embed, head, norm; 3 GDN layers, 1 attention
    total = sum(t.numel() * t.element_size() for t in stored.values())
    assert total == written.weight_bytes == checkpoint_bytes(c)


def test_a_checkpoint_over_the_shard_size_is_sharded_with_an_index(tmp_path):
    c = SIZES["tiny"]
    tensors = checkpoint_tensors(make_weights(c, "cpu"))
    # the embedding and the LM head (31.8 MB each) get shards of their own, the layers (0.3 MB)
    # one between them
    shard = 8 * 2**20
    total = write_checkpoint(tmp_path, tensors, shard_bytes=shard)
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    files = sorted(p.name for p in tmp_path.glob("*.safetensors"))
    assert files == [f"model-0000{i}-of-00003.safetensors" for i in range(1, 4)]
    assert index["metadata"]["total_size"] == total == checkpoint_bytes(c)
    assert sorted(index["weight_map"]) == sorted(name for name, _ in tensors)
    for file in files:
        with safe_open(tmp_path / file, framework="pt") as f:
            names = list(f.keys())
            assert all(index["weight_map"][name] == file for name in names)
            tensors_here = [f.get_tensor(name) for name in names]
        size = sum(t.numel() * t.element_size() for t in tensors_here)
        assert size <= shard or len(names) == 1, (file, size)


@pytest.mark.parametrize(
    "failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt]
)
def test_a_failure_while_writing_the_weights_leaves_nothing(failure, tmp_path, monkeypatch):
    """A full disk or Ctrl-C in the middle of the checkpoint: the half-written file and the
    staged configs go, and the missing parents made for them too."""
    import safetensors.torch

    def write_then_fail(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a checkpoint")
        raise failure

    monkeypatch.setattr(safetensors.torch, "save_file", write_then_fail)
    plan = ModelDirPlan("tiny", tmp_path / "a" / "b", gamma=3, device="cpu", weights=True)
    with pytest.raises(type(failure) if isinstance(failure, OSError) else failure):
        write_model_dir(plan)
    assert _tree(tmp_path) == {}


def test_an_interrupted_run_exits_130_and_leaves_nothing(tmp_path):
    """Ctrl-C once the configs are staged, while the weights are being made (torch's import,
    then large's draw and write: about 50 s on 2 cores, so the signal comes before the end)."""
    out = tmp_path / "large"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdn_parity.cli", "model-dir", "large", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_a_terminal,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".large.*/large/target/config.json")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err == "gdn-parity model-dir: interrupted\n"
    assert _tree(tmp_path) == {}


def _write_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("keep me\n")


def _fill(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine").write_text("keep me\n")


@pytest.mark.parametrize(
    "args,fragment,setup",
    [
        (["huge", "{out}"], "argument SIZE: invalid choice: 'huge'", None),
        (["tiny", ""], "argument OUT: '' is an empty path", None),
        (["tiny", "{out}", "--gamma", "0"], "'0' must be 1 to 16 (a DSpark block longer", None),
        (["tiny", "{out}", "--gamma", "17"], "the verify keeps gamma + 1 GDN states", None),
        (["tiny", "{out}"], "exists and is not an empty directory", _fill),
        (["tiny", "{out}"], "exists and is not an empty directory", _write_a_file),
        (["27b", "{out}"], "27b's checkpoint would be 54 GB, over the 32 GiB", None),
        (["27b", "{out}", "--device", "cuda"], "pass --no-weights and serve it with", None),
        (["27b-8l", "{out}"], "drawn on the GPU, as the harness draws them (11 GB)", None),
        pytest.param(
            ["27b-8l", "{out}", "--device", "cuda"],
            "--device cuda, but torch sees no CUDA device: run on CPU with --no-weights",
            None,
            marks=pytest.mark.skipif(CUDA, reason="the refusal of a machine without CUDA"),
        ),
    ],
)  # fmt: skip
def test_bad_input_is_refused_and_changes_nothing(args, fragment, setup, tmp_path, run_cli):
    if setup is not None:
        setup(tmp_path)
    before = _tree(tmp_path)
    proc = run_cli("model-dir", *[a.format(out=tmp_path / "out") for a in args])
    assert_refused(proc, fragment)
    assert _tree(tmp_path) == before


def test_the_size_limit_is_what_refuses_the_27b():
    """27b-8l's checkpoint fits under the limit and the 64-layer 27B's does not, so that one
    number decides which sizes get weights."""
    limit = modeldir_write.MAX_CHECKPOINT_BYTES
    assert checkpoint_bytes(SIZES["27b-8l"]) < limit < checkpoint_bytes(SIZES["27b"])
