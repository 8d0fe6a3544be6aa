"""A run plan: the servers to launch and the comparisons to make, read from TOML and checked.

Every check that needs no file but the plan runs in ``load_plan`` (a dry run's too);
``check_paths`` then checks what a real run needs on this machine (the interpreter,
the trees, the model directories, a draft's gamma), before any server starts. ``${NAME}``
in a string is ``--set NAME=VALUE``, else the environment's NAME. The keys, with their
defaults where they have one (``EXAMPLE``, which the tests read as a plan):
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gdn_parity.errors import GdnParityError
from gdn_parity.realserver.variables import expand, unset_names

EXAMPLE = """
python = "${SERVER_PYTHON}"   # the interpreter that runs the servers
start_timeout = 900           # seconds for a server to answer GET /health_generate with 200
stop_grace = 30               # seconds between SIGTERM and SIGKILL to a server's group
request_timeout = 600         # seconds per request

[common]                      # every server's, after the runner's flags
args = ["--attention-backend", "triton"]
env = { SGLANG_RAGGED_VERIFY_MODE = "static" }

[servers.base]
tree = "${TREE}"              # an sglang tree: <tree>/python goes first on PYTHONPATH
mode = "base"                 # or "dspark", with gamma and draft
model = "${MODEL}"            # the target's config.json and weights
load_format = "auto"          # --load-format: auto, safetensors or dummy
mem_fraction = 0.4            # --mem-fraction-static: of the memory free when it starts
cuda_graphs = true            # false: --disable-cuda-graph
trace = false                 # SGLANG_GDN_STATE_TRACE=<out>/<server>-trace (no CUDA graphs)
start_timeout = 900           # the plan's, unless given here
args = []                     # this server's, after the common ones
env = {}

[servers.dspark]
tree = "${TREE}"
mode = "dspark"
gamma = 1                     # --speculative-dspark-block-size (verify rows: gamma + 1)
model = "${MODEL}"
draft = "${DRAFT}"            # the draft's config.json (gamma overrides block_size)
mem_fraction = 0.4

[comparisons.reporter]
base = "base"
spec = "dspark"
batches = [1, 4]              # each sent concurrently, Base first
max_new_tokens = 96
prompt_len = 24               # request 0 is sglang#35150's 24 ids; the others are seeded
prompt_seed = 0
prompt_vocab = 248320         # the seeded ids are below this
expect = "identical"          # or "diverge" (a negative control)
reference = "batch"           # or "alone": base gets each request alone, one after another;
                              # base may then be any server, spec's own too (batch invariance)
"""

MODES = ("base", "dspark")
EXPECTATIONS = ("identical", "diverge")
REFERENCES = ("batch", "alone")  # how the base side of a comparison gets a batch
LOAD_FORMATS = ("auto", "safetensors", "dummy")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
QWEN35_VOCAB = 248320  # vocab_size of Qwen3.5's config.json, the harness's models' too
# Flags the runner writes itself, and the plan key (or reason) that sets each.
RUNNER_FLAGS = {
    "--model-path": "model",
    "--load-format": "load_format",
    "--skip-tokenizer-init": "always passed (requests send input_ids)",
    "--host": "always 127.0.0.1",
    "--port": "a free port, picked at start",
    "--random-seed": "always 0",
    "--mem-fraction-static": "mem_fraction",
    "--disable-cuda-graph": "cuda_graphs = false",
    "--speculative-algorithm": 'mode = "dspark"',
    "--speculative-draft-model-path": "draft",
    "--speculative-dspark-block-size": "gamma",
    "--speculative-num-draft-tokens": "gamma (sglang derives gamma + 1)",
    "--speculative-draft-load-format": "always dummy",
}
TRACE_ENV = "SGLANG_GDN_STATE_TRACE"


class PlanError(GdnParityError):
    """A plan that cannot run: one line naming the file, the key and the fix."""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    tree: Path
    mode: str
    model: Path
    draft: Path | None
    gamma: int | None
    mem_fraction: float
    cuda_graphs: bool
    trace: bool
    load_format: str
    start_timeout: float
    args: tuple[str, ...]
    env: Mapping[str, str]

    def describe(self) -> str:
        return self.mode if self.gamma is None else f"{self.mode}, gamma {self.gamma}"


@dataclass(frozen=True)
class ComparisonSpec:
    name: str
    base: str
    spec: str
    batches: tuple[int, ...]
    max_new_tokens: int
    prompt_len: int
    prompt_seed: int
    prompt_vocab: int
    expect: str
    reference: str = "batch"  # REFERENCES


def pair_label(base: str, spec: str, reference: str) -> str:
    """A comparison's servers in words: ``base vs spec``, or ``base alone vs spec``."""
    return f"{base} {'alone ' if reference == 'alone' else ''}vs {spec}"


@dataclass(frozen=True)
class ServerPlan:
    """What every plan of real servers holds: the interpreter, the limits, the flags and
    environment every server gets, and the servers (``server-cost``'s plans too)."""

    path: Path
    python: str
    stop_grace: float
    request_timeout: float
    common_args: tuple[str, ...]
    common_env: Mapping[str, str]
    servers: Mapping[str, ServerSpec]


@dataclass(frozen=True)
class RunPlan(ServerPlan):
    comparisons: tuple[ComparisonSpec, ...]


_REQUIRED = object()


class PlanTable:
    """One TOML table of the plan, read key by key; ``done`` refuses the keys not read."""

    def __init__(self, data: Any, where: str, error: Callable[[str, str], PlanError]) -> None:
        if not isinstance(data, dict):
            raise error(where, "must be a table")
        self.data, self.where, self.error = data, where, error
        self.read: list[str] = []

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def take(self, name: str, kind: Callable[[Any, str], Any], default: Any = _REQUIRED) -> Any:
        self.read.append(name)
        if name not in self.data:
            if default is _REQUIRED:
                raise self.error(self.key(name), "is missing")
            return default
        return kind(self.data[name], self.key(name))

    def done(self) -> None:
        unknown = [k for k in self.data if k not in self.read]
        if unknown:
            raise self.error(
                self.key(unknown[0]), f"is not a known key (known: {', '.join(self.read)})"
            )


def read_toml(path: Path, given: Mapping[str, str], environ: Mapping[str, str]) -> dict:
    """``path`` parsed, once every ``${NAME}`` in it is set in ``given`` or ``environ``."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise PlanError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path} is not a text file, so not a TOML plan") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path} is not valid TOML: {exc}") from exc
    unset = unset_names(data, given, environ)
    if unset:
        names = ", ".join(f"${{{n}}}" for n in unset)
        sets = " ".join(f"--set {n}=..." for n in unset)
        raise PlanError(f"{path}: {names} not set (pass {sets}, or export them)")
    return data


def load_plan(
    path: Path, given: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> RunPlan:
    """Read and check ``path``; ``${NAME}`` comes from ``given`` (``--set``), else ``environ``."""
    environ = os.environ if environ is None else environ
    return PlanReader(path, given, environ).plan(read_toml(path, given, environ))


class PlanReader:
    """Reads a parsed plan's tables, checking each value's kind; errors name the key."""

    def __init__(self, path: Path, given: Mapping[str, str], environ: Mapping[str, str]):
        self.path, self.given, self.environ = path, given, environ

    def error(self, where: str, message: str) -> PlanError:
        return PlanError(f"{self.path}: {where}: {message}")

    def table(self, data: Any, where: str) -> PlanTable:
        return PlanTable(data, where, self.error)

    # Kinds: (value, where) -> the checked value.

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(where, f"must be a non-empty string (got {value!r})")
        return self.expand(value, where)

    def expand(self, value: str, where: str) -> str:
        try:
            return expand(value, where, self.given, self.environ)
        except GdnParityError as exc:
            raise PlanError(f"{self.path}: {exc}") from None

    def directory(self, value: Any, where: str) -> Path:
        return Path(self.string(value, where)).expanduser().absolute()

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.error(where, f"must be a list of strings (got {value!r})")
        return tuple(self.string(v, f"{where}[{i}]") for i, v in enumerate(value))

    def env(self, value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(where, 'must be a table of NAME = "value"')
        for name, v in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise self.error(f"{where}.{name}", "is not an environment variable name")
            if not isinstance(v, str):
                raise self.error(
                    f"{where}.{name}", f'must be a string: write {name} = "{v}" (got {v!r})'
                )
            if name == TRACE_ENV:
                raise self.error(f"{where}.{name}", "is the runner's: set trace = true")
        return {name: self.expand(v, f"{where}.{name}") for name, v in value.items()}

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(where, f"must be true or false (got {value!r})")
        return value

    def integer(self, low: int) -> Callable[[Any, str], int]:
        def kind(value: Any, where: str) -> int:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise self.error(where, f"must be an integer of at least {low} (got {value!r})")
            return value

        return kind

    def seconds(self, value: Any, where: str) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise self.error(where, f"must be a number of seconds above 0 (got {value!r})")
        return float(value)

    def fraction(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise self.error(where, f"must be a number between 0 and 1 (got {value!r})")
        return float(value)

    def choice(self, choices: tuple[str, ...]) -> Callable[[Any, str], str]:
        def kind(value: Any, where: str) -> str:
            if value not in choices:
                raise self.error(where, f"must be one of {', '.join(choices)} (got {value!r})")
            return value

        return kind

    def batches(self, value: Any, where: str) -> tuple[int, ...]:
        positive = self.integer(1)
        if not isinstance(value, list) or not value:
            raise self.error(where, f"must be a non-empty list of batch sizes (got {value!r})")
        sizes = tuple(positive(v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(set(sizes)) != len(sizes):
            raise self.error(where, f"names a batch size twice ({list(sizes)})")
        return sizes

    def name(self, name: str, where: str) -> str:
        if not NAME.fullmatch(name):
            raise self.error(
                where, "is not a usable name (letters, digits, _ . -; it names files and rids)"
            )
        return name

    # The plan's tables.

    def args(self, value: Any, where: str) -> tuple[str, ...]:
        args = self.strings(value, where)
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in RUNNER_FLAGS:
                raise self.error(
                    where, f"{flag} is the runner's to pass (set by: {RUNNER_FLAGS[flag]})"
                )
        return args

    def tables(self, value: Any, where: str) -> dict:
        return self.table(value, where).data

    def server_plan(self, top: PlanTable, users: str) -> tuple[ServerPlan, dict]:
        """The plan's shared keys and servers from ``top``, and the table of what uses the
        servers (``users``: ``comparisons``, ``benchmarks``), unread. The caller reads its own
        keys of ``top``, if any, then calls ``top.done()``."""
        python = top.take("python", self.string)
        start_timeout = top.take("start_timeout", self.seconds, 900.0)
        stop_grace = top.take("stop_grace", self.seconds, 30.0)
        request_timeout = top.take("request_timeout", self.seconds, 600.0)
        common = self.table(top.take("common", lambda v, w: v, {}), "common")
        common_args = common.take("args", self.args, ())
        common_env = common.take("env", self.env, {})
        common.done()
        servers_data = top.take("servers", self.tables)
        users_data = top.take(users, self.tables)
        if not servers_data:
            raise self.error("servers", "names no server")
        if not users_data:
            raise self.error(users, f"names no {users.removesuffix('s')}")
        servers = {
            name: self.server(name, value, start_timeout) for name, value in servers_data.items()
        }
        shared = ServerPlan(
            self.path, python, stop_grace, request_timeout, common_args, common_env, servers
        )
        return shared, users_data

    def refuse_unused(self, servers: Mapping[str, ServerSpec], used: set[str], users: str) -> None:
        unused = [name for name in servers if name not in used]
        if unused:
            raise self.error(f"servers.{unused[0]}", f"is in no {users} (remove it)")

    def plan(self, data: dict) -> RunPlan:
        top = self.table(data, "")
        shared, comparisons_data = self.server_plan(top, "comparisons")
        top.done()
        servers = shared.servers
        comparisons = tuple(self.comparison(n, v, servers) for n, v in comparisons_data.items())
        self.refuse_unused(
            servers, {c.base for c in comparisons} | {c.spec for c in comparisons}, "comparison"
        )
        return RunPlan(**shared_fields(shared), comparisons=comparisons)

    def server(self, name: str, data: Any, start_timeout: float) -> ServerSpec:
        where = f"servers.{name}"
        self.name(name, where)
        t = self.table(data, where)
        spec = ServerSpec(
            name=name,
            tree=t.take("tree", self.directory),
            mode=t.take("mode", self.choice(MODES)),
            model=t.take("model", self.directory),
            draft=t.take("draft", self.directory, None),
            gamma=t.take("gamma", self.integer(1), None),
            mem_fraction=t.take("mem_fraction", self.fraction),
            cuda_graphs=t.take("cuda_graphs", self.boolean, True),
            trace=t.take("trace", self.boolean, False),
            load_format=t.take("load_format", self.choice(LOAD_FORMATS), "auto"),
            start_timeout=t.take("start_timeout", self.seconds, start_timeout),
            args=t.take("args", self.args, ()),
            env=t.take("env", self.env, {}),
        )
        t.done()
        speculative = spec.mode == "dspark"
        for key, value in (("gamma", spec.gamma), ("draft", spec.draft)):
            if speculative and value is None:
                raise self.error(f"{where}.{key}", 'is missing (mode = "dspark" needs it)')
            if not speculative and value is not None:
                raise self.error(f"{where}.{key}", 'is for mode = "dspark" only')
        if spec.trace and spec.cuda_graphs:
            raise self.error(
                f"{where}.trace",
                "needs cuda_graphs = false (the series' SGLANG_GDN_STATE_TRACE refuses "
                "CUDA graphs at start-up)",
            )
        return spec

    def comparison(self, name: str, data: Any, servers: Mapping[str, ServerSpec]) -> ComparisonSpec:
        where = f"comparisons.{name}"
        self.name(name, where)
        t = self.table(data, where)
        c = ComparisonSpec(
            name=name,
            base=t.take("base", self.string),
            spec=t.take("spec", self.string),
            batches=t.take("batches", self.batches),
            max_new_tokens=t.take("max_new_tokens", self.integer(1)),
            prompt_len=t.take("prompt_len", self.integer(1), 24),
            prompt_seed=t.take("prompt_seed", self.integer(0), 0),
            prompt_vocab=t.take("prompt_vocab", self.integer(2), QWEN35_VOCAB),
            expect=t.take("expect", self.choice(EXPECTATIONS)),
            reference=t.take("reference", self.choice(REFERENCES), "batch"),
        )
        t.done()
        alone = c.reference == "alone"
        for key, mode in (("base", "base"), ("spec", "dspark")):
            server = servers.get(getattr(c, key))
            if server is None:
                raise self.error(
                    f"{where}.{key}",
                    f"names no server ({getattr(c, key)!r}; servers: {', '.join(servers)})",
                )
            if server.mode != mode and not (alone and key == "base"):
                raise self.error(
                    f"{where}.{key}", f'{server.name} is mode = "{server.mode}", not "{mode}"'
                )
            if alone and server.trace:
                raise self.error(
                    f"{where}.reference",
                    f'"alone" compares tokens only, and {server.name} traces its states: set '
                    "trace = false or drop reference",
                )
        if c.prompt_vocab**c.prompt_len < max(c.batches):
            raise self.error(
                where,
                f"prompt_vocab ** prompt_len = {c.prompt_vocab**c.prompt_len} distinct prompts, "
                f"fewer than batch {max(c.batches)}",
            )
        return c


def shared_fields(plan: ServerPlan) -> dict[str, Any]:
    """``plan``'s fields by name, for a plan of a kind built on it (not deep-copied)."""
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(ServerPlan)}


def _executable(python: str) -> Path | None:
    if "/" in python:
        path = Path(python).expanduser().absolute()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(python)
    return Path(found) if found else None


def resolve_python(plan: ServerPlan) -> Path:
    """The plan's interpreter as an absolute path; an error when it is not one."""
    found = _executable(plan.python)
    if found is None:
        raise PlanError(f"{plan.path}: python: {plan.python} is not an executable file")
    return found


def _config(directory: Path, where: str) -> dict:
    config = directory / "config.json"
    try:
        data = json.loads(config.read_text())
    except FileNotFoundError:
        raise PlanError(f"{where}: {directory} holds no config.json") from None
    except (OSError, ValueError) as exc:
        raise PlanError(f"{where}: {config} is not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise PlanError(f"{where}: {config} is not a JSON object")
    return data


def check_paths(plan: ServerPlan) -> Path:
    """What a real run needs here, checked before any server starts; the interpreter."""
    python = resolve_python(plan)
    for server in plan.servers.values():
        where = f"{plan.path}: servers.{server.name}"
        if not (server.tree / "python" / "sglang").is_dir():
            raise PlanError(f"{where}.tree: {server.tree} is not an sglang tree (no python/sglang)")
        _config(server.model, f"{where}.model")
        if server.draft is not None:
            names = _config(server.draft, f"{where}.draft").get("architectures") or []
            if not any("DSpark" in str(name) for name in names):
                raise PlanError(
                    f"{where}.draft: {server.draft}/config.json's architectures {names} name no "
                    "DSpark draft (a target directory given as the draft?)"
                )
    return python
