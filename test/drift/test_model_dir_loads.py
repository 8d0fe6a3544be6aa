"""sglang reads what ``gdn-parity model-dir`` writes as the harness's model.

- sglang's config classes parse the target's and the draft's ``config.json`` into the harness's
  geometry, for every size; the registry resolves their architectures to
  ``qwen3_5_text.Qwen3_5ForCausalLM`` and ``dspark.Qwen3DSparkModel``; a Base and a DSpark
  server's arguments resolve with the flags ``model-dir --help`` names.
- sglang's own ``Qwen3_5ForCausalLM``, built from the written config, takes the written
  checkpoint through sglang's own loader (``DefaultModelLoader``'s file discovery and
  safetensors iterator, then the model's ``load_weights``): every parameter is loaded, and
  each holds the tensor the harness's server stack multiplies by (its fused q/k/v, qkvz, ba and
  gate/up tensors; each Gemma norm multiplying by the harness's multiplier).

The models are built on CPU as sglang's own layer tests build theirs
(``sglang.test.layer_ut_utils``): one gloo process group and a published test topology
(tensor-parallel size 1). One stand-in: ``RotaryEmbedding.__init__`` imports vllm's rotary
kernel where sglang's CUDA one does not apply, and vllm is not installed here; the import gets
an ``Absent`` that raises if called. Loading weights calls no kernel.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from gdn_parity.drift.model.config import SIZES, ModelConfig
from gdn_parity.drift.model.weights import GDNWeights, ModelWeights, make_weights
from gdn_parity.drift.modeldir.checkpoint import checkpoint_tensors
from gdn_parity.drift.modeldir.configs import target_config
from gdn_parity.drift.modeldir.safetensors_files import INDEX_NAME, write_checkpoint
from gdn_parity.drift.modeldir.write import ModelDirPlan, write_model_dir
from gdn_parity.sandbox.sgl_kernel_stub import Absent

GAMMA = 3
# tiny with the 27B's attention: the output gate (q_proj rows: each head's query, then its
# gate), rotary on a quarter of each head, rope theta 1e7
TINY_GATED = dataclasses.replace(
    SIZES["tiny"],
    name="tiny-gated",
    attn_output_gate=True,
    partial_rotary_factor=0.25,
    rope_theta=SIZES["27b"].rope_theta,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sglang_layers(sglang_tree):
    """What sglang's layers read when they are built: a world of one (gloo) and the test
    topology, torn down after the module."""
    from sglang.srt.distributed.parallel_state import cleanup_dist_env_and_memory
    from sglang.srt.runtime_context import reset_context
    from sglang.test.layer_ut_utils import init_single_process_dist

    with pytest.MonkeyPatch.context() as mp:
        for name, value in {
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0",
            "WORLD_SIZE": "1", "LOCAL_RANK": "0",
        }.items():  # fmt: skip
            mp.setenv(name, value)
        try:
            import vllm._custom_ops  # noqa: F401
        except ImportError:
            ops = types.ModuleType("vllm._custom_ops")
            ops.rotary_embedding = Absent("vllm._custom_ops.rotary_embedding")
            mp.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
            mp.setitem(sys.modules, "vllm._custom_ops", ops)
        init_single_process_dist()
        try:
            yield
        finally:
            cleanup_dist_env_and_memory()
            reset_context()


def _model_dir(size: str, root: Path, weights: bool) -> Path:
    out = root / size
    write_model_dir(ModelDirPlan(size, out, gamma=GAMMA, device="cpu", weights=weights))
    return out


def _config(path: Path):
    from sglang.srt.utils.hf_transformers_utils import get_config

    return get_config(str(path), trust_remote_code=False)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_sglang_reads_the_target_config_as_the_harness_geometry(size, tmp_path, sglang_layers):
    from sglang.srt.configs.qwen3_5 import Qwen3_5TextConfig
    from sglang.srt.utils.hf_transformers.common import get_rope_config

    c = SIZES[size]
    cfg = _config(_model_dir(size, tmp_path, weights=False) / "target")
    assert type(cfg) is Qwen3_5TextConfig
    assert cfg.architectures == ["Qwen3_5ForCausalLM"]
    assert cfg.layers_block_type == [
        "linear_attention" if c.is_gdn(i) else "attention" for i in range(c.layers)
    ]
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.rms_norm_eps) == (
        c.hidden, c.intermediate, c.vocab, c.rms_eps,
    )  # fmt: skip
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (
        c.attn_heads, c.attn_kv_heads, c.attn_head_dim,
    )  # fmt: skip
    assert (cfg.attn_output_gate, cfg.partial_rotary_factor) == (
        c.attn_output_gate, c.partial_rotary_factor,
    )  # fmt: skip
    theta, rope = get_rope_config(cfg)
    assert theta == c.rope_theta and rope["rope_type"] == "default"
    assert "mrope_section" not in rope  # 1-D positions: no M-RoPE on a text model
    assert cfg.tie_word_embeddings is False and cfg.hidden_act == "silu"
    # the GDN pool sglang sizes from it: conv state [qkv channels, width - 1], SSM [HV, V, K]
    shape = cfg.mamba2_cache_params.shape
    assert shape.conv == [(c.qkv_dim, c.conv_width - 1)]
    assert shape.temporal == (c.gdn_v_heads, c.gdn_head_dim, c.gdn_head_dim)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_sglang_reads_the_draft_config_as_a_dspark_draft_of_the_target(
    size, tmp_path, sglang_layers
):
    from sglang.srt.speculative.dflash_utils import build_target_layer_ids
    from sglang.srt.speculative.dspark_components.dspark_config import (
        parse_dspark_draft_config,
        resolve_runtime_config,
    )

    c = SIZES[size]
    out = _model_dir(size, tmp_path, weights=False)
    draft, target = _config(out / "draft"), _config(out / "target")
    assert draft.architectures == ["Qwen3DSparkModel"]
    assert draft.hidden_size == target.hidden_size
    parsed = parse_dspark_draft_config(draft_hf_config=draft)
    assert (parsed.gamma, parsed.num_target_layers) == (GAMMA, c.layers)
    assert (parsed.markov_rank > 0, parsed.markov_head_type) == (True, "vanilla")
    # the layers DFlash itself picks for a draft of this depth that names none
    assert parsed.target_layer_ids == build_target_layer_ids(c.layers, draft.num_hidden_layers)
    assert len(set(parsed.target_layer_ids)) == len(parsed.target_layer_ids)
    runtime = resolve_runtime_config(
        draft_hf_config=draft,
        speculative_num_draft_tokens=GAMMA + 1,
        target_vocab_size=target.vocab_size,
    )
    assert (runtime.gamma, runtime.verify_num_draft_tokens) == (GAMMA, GAMMA + 1)


def _in_a_process_of_its_own(script: str, tree: Path) -> list[str]:
    """The lines ``script`` prints, run on the tree's sglang with the test bed's sandbox, in a
    process of its own: sglang's registry imports every model module, and resolving server
    arguments sets process-wide environment (SGLANG_MAMBA_SSM_DTYPE, ...), none of which may
    reach the other tests."""
    prologue = (
        "import sys\n"
        "from gdn_parity.sandbox import torchvision_shim, triton_interpreter_fixes\n"
        "triton_interpreter_fixes.install(); torchvision_shim.install()\n"
        f"sys.path.insert(0, {str(tree / 'python')!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", prologue + script], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


@pytest.mark.slow
def test_the_architectures_resolve_to_the_text_model_and_the_dspark_draft(tmp_path, sglang_tree):
    """Through sglang's model registry, as the server picks the class for a checkpoint."""
    out = _model_dir("tiny", tmp_path, weights=False)
    archs = [json.loads((out / m / "config.json").read_text())["architectures"] for m in
             ("target", "draft")]  # fmt: skip
    script = (
        "from sglang.srt.models.registry import ModelRegistry\n"
        f"for archs in {archs!r}:\n"
        "    cls, _ = ModelRegistry.resolve_model_cls(archs)\n"
        "    print(f'{cls.__module__}.{cls.__qualname__}')\n"
    )
    assert _in_a_process_of_its_own(script, sglang_tree) == [
        "sglang.srt.models.qwen3_5_text.Qwen3_5ForCausalLM",
        "sglang.srt.models.dspark.Qwen3DSparkModel",
    ]


@pytest.mark.slow
def test_the_servers_arguments_resolve_with_the_flags_the_verb_names(tmp_path, sglang_tree):
    """A Base and a DSpark server's arguments, as ``launch_server`` resolves them before it
    loads anything (``--device cuda`` needs no GPU until then), with the contract's flags: the
    flags ``model-dir --help`` names are accepted with these directories."""
    out = _model_dir("tiny", tmp_path, weights=True)
    base = [
        "--model-path", str(out / "target"), "--skip-tokenizer-init",
        "--mamba-ssm-dtype", "bfloat16", "--device", "cuda", "--attention-backend", "triton",
        "--linear-attn-prefill-backend", "triton", "--enable-deterministic-inference",
        "--gdn-verify-exact-parity", "--disable-overlap-schedule",
        "--mamba-radix-cache-strategy", "no_buffer",
    ]  # fmt: skip
    dspark = [
        *base, "--speculative-algorithm", "DSPARK",
        "--speculative-draft-model-path", str(out / "draft"),
        "--speculative-draft-load-format", "dummy",
        "--speculative-num-draft-tokens", str(GAMMA + 1),
        "--speculative-draft-attention-backend", "triton",
    ]  # fmt: skip
    script = (
        "from sglang.srt.server_args import prepare_server_args\n"
        f"for argv in {[base, dspark]!r}:\n"
        "    args = prepare_server_args(argv)\n"
        "    args.resolve_once()\n"
        "    print(args.load_format, args.mamba_ssm_dtype, args.speculative_algorithm,\n"
        "          args.speculative_draft_load_format, args.speculative_num_draft_tokens)\n"
    )
    assert _in_a_process_of_its_own(script, sglang_tree) == [
        "auto bfloat16 None None None",
        f"auto bfloat16 DSPARK dummy {GAMMA + 1}",
    ]


def _write_target(c: ModelConfig, out: Path, shard_bytes: int | None) -> None:
    """What ``write_model_dir`` writes under ``target/`` for ``c``, with shards of
    ``shard_bytes`` (None: the writer's default)."""
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(target_config(c)))
    kwargs = {} if shard_bytes is None else {"shard_bytes": shard_bytes}
    write_checkpoint(out, checkpoint_tensors(make_weights(c, "cpu")), **kwargs)


def _expected_parameters(w: ModelWeights) -> dict[str, torch.Tensor]:
    """sglang's parameters, each the tensor the harness's server stack multiplies by
    (``server/model.py``), the Gemma norms' stored as the multiplier less one."""
    expected = {
        "model.embed_tokens.weight": w.embed,
        "model.norm.weight": w.final_norm - 1,
        "lm_head.weight": w.lm_head,
    }
    for i, lw in enumerate(w.layers):
        layer, m = f"model.layers.{i}", lw.mixer
        expected |= {
            f"{layer}.input_layernorm.weight": lw.input_norm - 1,
            f"{layer}.post_attention_layernorm.weight": lw.post_norm - 1,
            f"{layer}.mlp.gate_up_proj.weight": lw.gate_up,
            f"{layer}.mlp.down_proj.weight": lw.down,
        }
        if isinstance(m, GDNWeights):
            gdn = f"{layer}.linear_attn"
            expected |= {
                f"{gdn}.in_proj_qkvz.weight": m.qkvz,
                f"{gdn}.in_proj_ba.weight": m.ba,
                f"{gdn}.conv1d.weight": m.conv.unsqueeze(1),
                f"{gdn}.A_log": m.A_log,
                f"{gdn}.dt_bias": m.dt_bias,
                f"{gdn}.norm.weight": m.norm,
                f"{gdn}.out_proj.weight": m.out,
            }
        else:
            expected |= {
                f"{layer}.qkv_proj.weight": m.qkv,
                f"{layer}.o_proj.weight": m.o,
                f"{layer}.q_norm.weight": m.q_norm - 1,
                f"{layer}.k_norm.weight": m.k_norm - 1,
            }
    return expected


def _norm_multipliers(w: ModelWeights) -> dict[str, torch.Tensor]:
    """Each GemmaRMSNorm module of sglang's model, and the multiplier the harness applies
    there."""
    multipliers = {"model.norm": w.final_norm}
    for i, lw in enumerate(w.layers):
        layer = f"model.layers.{i}"
        multipliers |= {
            f"{layer}.input_layernorm": lw.input_norm,
            f"{layer}.post_attention_layernorm": lw.post_norm,
        }
        if not isinstance(lw.mixer, GDNWeights):
            multipliers |= {f"{layer}.q_norm": lw.mixer.q_norm, f"{layer}.k_norm": lw.mixer.k_norm}
    return multipliers


@pytest.mark.parametrize(
    "c,shard_bytes",
    [
        pytest.param(SIZES["tiny"], None, id="tiny-one-file"),
        pytest.param(SIZES["tiny"], 8 * 2**20, id="tiny-three-shards"),
        pytest.param(TINY_GATED, None, id="tiny-with-the-27b-attention"),
    ],
)
def test_sglangs_loader_fills_every_parameter_with_the_harness_weights(
    c, shard_bytes, tmp_path, sglang_layers
):
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.layers.layernorm import GemmaRMSNorm
    from sglang.srt.model_loader.loader import DefaultModelLoader
    from sglang.srt.model_loader.utils import set_default_torch_dtype
    from sglang.srt.models.qwen3_5_text import Qwen3_5ForCausalLM

    target = tmp_path / "target"
    _write_target(c, target, shard_bytes)
    assert (target / INDEX_NAME).exists() == (shard_bytes is not None)
    with set_default_torch_dtype(torch.bfloat16):
        model = Qwen3_5ForCausalLM(_config(target))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(float("nan"))  # what the loader does not write stays NaN
    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    weights = loader._get_weights_iterator(DefaultModelLoader.Source(str(target), None))
    loaded = model.load_weights(weights)

    parameters = dict(model.named_parameters())
    assert loaded == set(parameters)
    expected = _expected_parameters(make_weights(c, "cpu"))
    assert set(expected) == set(parameters)
    wrong = [
        name
        for name, tensor in expected.items()
        if parameters[name].dtype != tensor.dtype or not torch.equal(parameters[name], tensor)
    ]
    assert wrong == []
    modules = dict(model.named_modules())
    multipliers = _norm_multipliers(make_weights(c, "cpu"))
    assert {n for n, m in modules.items() if isinstance(m, GemmaRMSNorm)} == set(multipliers)
    for name, multiplier in multipliers.items():
        assert torch.equal(modules[name].gemma_weight, multiplier), name

    # the rest of what the config sets, as sglang's layers took it
    attention = model.model.layers[c.full_attention_interval - 1]
    assert attention.attn_output_gate == c.attn_output_gate
    rotary = attention.rotary_emb
    assert (rotary.rotary_dim, rotary.base, rotary.is_neox_style) == (
        c.rotary_dim, c.rope_theta, True,
    )  # fmt: skip
    assert not model.is_mrope_enabled


def test_the_target_takes_the_drafts_capture_layers_and_the_draft_builds(tmp_path, sglang_layers):
    """What a DSpark server asks of both at start-up: the target validates the layers the draft
    reads; the draft (dummy weights) is built with one context feature per layer read."""
    from sglang.srt.model_loader.utils import set_default_torch_dtype
    from sglang.srt.models.dspark import Qwen3DSparkModel
    from sglang.srt.models.qwen3_5_text import Qwen3_5ForCausalLM

    out = _model_dir("tiny", tmp_path, weights=False)
    draft_config = _config(out / "draft")
    with set_default_torch_dtype(torch.bfloat16):
        target = Qwen3_5ForCausalLM(_config(out / "target"))
        draft = Qwen3DSparkModel(draft_config)
    layer_ids = draft_config.dflash_config["target_layer_ids"]
    target.set_dflash_layers_to_capture(layer_ids)
    assert target.capture_aux_hidden_states
    assert (draft.gamma, draft.num_context_features) == (GAMMA, len(layer_ids))
    assert draft.fc.in_features == len(layer_ids) * SIZES["tiny"].hidden
