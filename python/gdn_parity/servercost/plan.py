"""A cost plan: the servers to time and the benchmarks to run on them, read from TOML and checked.

Its top keys, ``[common]`` and ``[servers.NAME]`` are server-parity's
(``gdn_parity.realserver.plan``: the same keys, defaults and checks); in place of
comparisons it holds ``[benchmarks.NAME]``. Every check that needs no file but the plan runs
in ``load_cost_plan`` (a dry run's too); ``check_cost_paths`` then checks this machine's
paths and that each model's ``config.json`` has ``size``'s geometry, whose bytes the floor
counts. The keys only a cost plan has, with their defaults (``EXAMPLE``, which the tests
read as a plan):
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.modeldir.configs import target_config
from gdn_parity.realserver.plan import (
    QWEN35_VOCAB,
    PlanError,
    PlanReader,
    ServerPlan,
    ServerSpec,
    check_paths,
    read_toml,
    shared_fields,
)

EXAMPLE = """
python = "${SERVER_PYTHON}"
request_timeout = 1800        # seconds per request: a batch of 64 long prompts prefills first
size = "27b"                  # the model's geometry, for the floor (gdn-parity model-dir SIZE)
ssm_dtype = "float32"         # every server's --mamba-ssm-dtype (the runner passes it)
kv_cache_dtype = "auto"       # every server's --kv-cache-dtype (the runner passes it)

[common]
args = ["--attention-backend", "triton", "--max-running-requests", "64"]
env = { SGLANG_RAGGED_VERIFY_MODE = "static" }

[servers.base]
tree = "${TREE}"
mode = "base"
model = "${MODEL}"
load_format = "dummy"         # no weights to read: timing needs none
mem_fraction = 0.85

[servers.base-exact]
tree = "${TREE}"
mode = "base"
model = "${MODEL}"
load_format = "dummy"
mem_fraction = 0.85
args = ["--gdn-verify-exact-parity", "--enable-deterministic-inference"]

[servers.dspark-g1]
tree = "${TREE}"
mode = "dspark"
gamma = 1
model = "${MODEL}"
draft = "${DRAFT}"
load_format = "dummy"
mem_fraction = 0.85

[benchmarks.tpot]
servers = ["base", "base-exact", "dspark-g1"]
baseline = "base"             # the TPOT ratio's denominator: a Base server of the list
contract = { base-exact = "base" }  # a server under the contract = its twin without it
batches = [1, 4]              # each sent concurrently
accept_lengths = [1, 2]       # DSpark's SGLANG_SIMULATE_ACC_LEN, one start each; default:
                              # 1 to gamma + 1 (a length above a server's gamma + 1: not run)
prompt_len = 2048             # seeded ids per request
prompt_seed = 0
prompt_vocab = 248320         # the seeded ids are below this
short_tokens = 49             # new tokens of the run whose time is subtracted
long_tokens = 289             # new tokens of the run timed
repeats = 3                   # short and long runs per batch, after one warm-up run
"""

# Both flags of the contract (docs/usage.md): a contract server passes both, its twin neither.
CONTRACT_FLAGS = ("--gdn-verify-exact-parity", "--enable-deterministic-inference")
SSM_DTYPES = ("float32", "bfloat16", "float16")
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8_e4m3", "fp8_e5m2")
# Flags the cost runner passes or rules out, and why: the floor counts these widths.
COST_FLAGS = {
    "--mamba-ssm-dtype": "ssm_dtype",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--dtype": "the floor counts the model directory's bfloat16 weights",
    "--quantization": "the floor counts the model directory's bfloat16 weights",
}
SIMULATE_ENV = ("SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_TOKEN_MODE")
COST_ENV = {
    **{name: "accept_lengths" for name in SIMULATE_ENV},
    "SGLANG_MAMBA_SSM_DTYPE": "ssm_dtype",
    "SGLANG_MAMBA_CONV_DTYPE": "the floor counts sglang's bfloat16 conv state",
}
# The keys of a target's config.json that set the floor's bytes (modeldir.configs).
GEOMETRY = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "full_attention_interval", "num_attention_heads", "num_key_value_heads", "head_dim",
    "attn_output_gate", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
)  # fmt: skip


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    servers: tuple[str, ...]
    baseline: str
    contract: Mapping[str, str]  # a server under the contract -> its twin without it
    batches: tuple[int, ...]
    accept_lengths: tuple[int, ...] | None  # None: 1 to gamma + 1 on each DSpark server
    prompt_len: int
    prompt_seed: int
    prompt_vocab: int
    short_tokens: int
    long_tokens: int
    repeats: int

    def lengths_on(self, server: ServerSpec) -> tuple[int | None, ...]:
        """The accept lengths ``server`` runs this benchmark at; Base: ``(None,)``."""
        if server.gamma is None:
            return (None,)
        wanted = self.accept_lengths or range(1, server.gamma + 2)
        return tuple(k for k in wanted if k <= server.gamma + 1)


@dataclass(frozen=True)
class CostPlan(ServerPlan):
    size: str
    ssm_dtype: str
    kv_cache_dtype: str
    benchmarks: tuple[BenchmarkSpec, ...]


def load_cost_plan(path: Path, given: Mapping[str, str], environ: Mapping[str, str]) -> CostPlan:
    """Read and check ``path``; ``${NAME}`` comes from ``given`` (``--set``), else ``environ``."""
    return _CostReader(path, given, environ).cost_plan(read_toml(path, given, environ))


class _CostReader(PlanReader):
    def args(self, value: Any, where: str) -> tuple[str, ...]:
        args = super().args(value, where)
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in COST_FLAGS:
                raise self.error(where, f"{flag} is the cost runner's (set by: {COST_FLAGS[flag]})")
        return args

    def env(self, value: Any, where: str) -> dict[str, str]:
        env = super().env(value, where)
        for name in env:
            if name in COST_ENV:
                raise self.error(
                    f"{where}.{name}", f"is the cost runner's (set by: {COST_ENV[name]})"
                )
        return env

    def cost_plan(self, data: dict) -> CostPlan:
        top = self.table(data, "")
        shared, benchmarks_data = self.server_plan(top, "benchmarks")
        size = top.take("size", self.choice(tuple(SIZES)))
        ssm_dtype = top.take("ssm_dtype", self.named(SSM_DTYPES), "float32")
        kv_cache_dtype = top.take("kv_cache_dtype", self.named(KV_CACHE_DTYPES), "auto")
        top.done()
        for server in shared.servers.values():
            if server.trace:
                raise self.error(
                    f"servers.{server.name}.trace",
                    "must be false: a traced server copies its states to the host every step",
                )
        benchmarks = tuple(self.benchmark(n, v, shared) for n, v in benchmarks_data.items())
        used = {name for b in benchmarks for name in b.servers}
        self.refuse_unused(shared.servers, used, "benchmark")
        return CostPlan(
            **shared_fields(shared),
            size=size,
            ssm_dtype=ssm_dtype,
            kv_cache_dtype=kv_cache_dtype,
            benchmarks=benchmarks,
        )

    def named(self, choices: tuple[str, ...]) -> Callable[[Any, str], str]:
        """A string, ``${NAME}`` expanded, that is one of ``choices``."""

        def kind(value: Any, where: str) -> str:
            return self.choice(choices)(self.string(value, where), where)

        return kind

    def server_list(
        self, servers: Mapping[str, ServerSpec]
    ) -> Callable[[Any, str], tuple[str, ...]]:
        def kind(value: Any, where: str) -> tuple[str, ...]:
            if not isinstance(value, list) or not value:
                raise self.error(where, f"must be a non-empty list of server names (got {value!r})")
            names = tuple(self.string(v, f"{where}[{i}]") for i, v in enumerate(value))
            for name in names:
                if name not in servers:
                    raise self.error(
                        where, f"names no server ({name!r}; servers: {', '.join(servers)})"
                    )
            if len(set(names)) != len(names):
                raise self.error(where, f"names a server twice ({list(names)})")
            return names

        return kind

    def lengths(self, value: Any, where: str) -> tuple[int, ...]:
        positive = self.integer(1)
        if not isinstance(value, list) or not value:
            raise self.error(where, f"must be a non-empty list of accept lengths (got {value!r})")
        lengths = tuple(positive(v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(set(lengths)) != len(lengths):
            raise self.error(where, f"names an accept length twice ({list(lengths)})")
        return lengths

    def benchmark(self, name: str, data: Any, shared: ServerPlan) -> BenchmarkSpec:
        where, servers = f"benchmarks.{name}", shared.servers
        self.name(name, where)
        t = self.table(data, where)
        b = BenchmarkSpec(
            name=name,
            servers=t.take("servers", self.server_list(servers)),
            baseline=t.take("baseline", self.string),
            contract=t.take("contract", self.pairs, {}),
            batches=t.take("batches", self.batches),
            accept_lengths=t.take("accept_lengths", self.lengths, None),
            prompt_len=t.take("prompt_len", self.integer(1)),
            prompt_seed=t.take("prompt_seed", self.integer(0), 0),
            prompt_vocab=t.take("prompt_vocab", self.integer(2), QWEN35_VOCAB),
            short_tokens=t.take("short_tokens", self.integer(2)),
            long_tokens=t.take("long_tokens", self.integer(3)),
            repeats=t.take("repeats", self.integer(1), 3),
        )
        t.done()
        listed = {s: servers[s] for s in b.servers}
        if b.baseline not in listed:
            raise self.error(f"{where}.baseline", f"{b.baseline!r} is not in {where}.servers")
        if listed[b.baseline].mode != "base":
            raise self.error(
                f"{where}.baseline",
                f'{b.baseline} is mode = "{listed[b.baseline].mode}", not "base"',
            )
        for exact, twin in b.contract.items():
            self.check_pair(f"{where}.contract.{exact}", listed, shared.common_args, exact, twin)
        gammas = [s.gamma for s in listed.values() if s.gamma is not None]
        if b.accept_lengths is not None:
            if not gammas:
                raise self.error(
                    f"{where}.accept_lengths", "is for DSpark servers: the list has none"
                )
            too_long = [k for k in b.accept_lengths if k > max(gammas) + 1]
            if too_long:
                raise self.error(
                    f"{where}.accept_lengths",
                    f"{too_long[0]} is above every listed server's gamma + 1 ({max(gammas) + 1})",
                )
        if b.long_tokens <= b.short_tokens:
            raise self.error(
                f"{where}.long_tokens",
                f"must be more than short_tokens ({b.long_tokens} <= {b.short_tokens})",
            )
        if b.prompt_vocab**b.prompt_len < max(b.batches):
            raise self.error(
                where,
                f"prompt_vocab ** prompt_len = {b.prompt_vocab**b.prompt_len} distinct prompts, "
                f"fewer than batch {max(b.batches)}",
            )
        return b

    def pairs(self, value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(where, 'must be a table of exact-server = "twin-server"')
        return {name: self.string(v, f"{where}.{name}") for name, v in value.items()}

    def check_pair(
        self,
        where: str,
        listed: Mapping[str, ServerSpec],
        common_args: tuple[str, ...],
        exact: str,
        twin: str,
    ) -> None:
        for name in (exact, twin):
            if name not in listed:
                raise self.error(where, f"{name!r} is not in the benchmark's servers")
        if exact == twin:
            raise self.error(where, "pairs a server with itself")
        e, t = listed[exact], listed[twin]
        if (e.mode, e.gamma) != (t.mode, t.gamma):
            raise self.error(
                where, f"{exact} is {e.describe()}, its twin {twin} is {t.describe()}: not a pair"
            )
        for server, wanted in ((e, True), (t, False)):
            args = (*common_args, *server.args)
            wrong = [f for f in CONTRACT_FLAGS if (f in args) != wanted]
            if wrong:
                verb = "lacks" if wanted else "passes"
                raise self.error(where, f"{server.name} {verb} {wrong[0]} (common and own args)")


def check_cost_paths(plan: CostPlan) -> Path:
    """What a real run needs here (``check_paths``), and each model's geometry: ``size``'s,
    whose bytes the floor counts; the interpreter."""
    python = check_paths(plan)
    expected = target_config(SIZES[plan.size])
    for server in plan.servers.values():
        config = json.loads((server.model / "config.json").read_text())
        differ = [k for k in GEOMETRY if config.get(k) != expected[k]]
        if differ:
            key = differ[0]
            raise PlanError(
                f"{plan.path}: servers.{server.name}.model: {server.model}/config.json has "
                f"{key} = {config.get(key)!r}, size {plan.size}'s is {expected[key]!r} (the "
                "floor counts size's bytes: write the model with gdn-parity model-dir "
                f"{plan.size}, or set size)"
            )
    return python
