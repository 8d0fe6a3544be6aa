"""A failure that is not bad input (a patch that does not apply, a git am the user's git
refuses, a download that fails, a patched sglang that does not import, a worker that
crashes) is one line on stderr, after the progress notes, that names a log file holding
the detail; exit status 2, never 1 (a verdict).

Each fails for real: an edited copy of the series, a git hook, pip without an index, an
exported patch that breaks an import. They run on a scratch cache whose base is the
session cache's, so their trees and logs stay apart.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gdn_parity.queue.base import base_repo
from helpers.cli import assert_failed_on_one_line, is_note, scratch_cache_in

BROKEN_MODULE = "python/sglang/kernels/ops/attention/fla/fused_recurrent.py"
MISSING = "gdn_parity_test_no_such_module"


@pytest.fixture(scope="module")
def scratch(series, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A directory, and the environment of a cache in it that shares the session's base."""
    root = tmp_path_factory.mktemp("scratch")
    cache = scratch_cache_in(series, root)
    return root, {**os.environ, "GDN_PARITY_CACHE": str(cache)}


@pytest.fixture(scope="module")
def broken_series(series, scratch, run_cli) -> tuple[Path, Path]:
    """A copy of the series with an eighth patch after which sglang's fla kernels do not
    import (made as a developer would: commit in a tree, ``gdn-parity export``), and the tree."""
    root, env = scratch
    patches, tree = root / "broken-patches", root / "broken-tree"
    shutil.copytree(series.directory, patches)
    made = run_cli("--patches", str(patches), "tree", str(tree), env=env)
    assert made.returncode == 0, made.stderr
    with (tree / BROKEN_MODULE).open("a") as module:
        module.write(f"import {MISSING}\n")
    identity = ["-c", "user.name=gdn-parity test", "-c", "user.email=test@gdn-parity.invalid"]
    for args in (["add", BROKEN_MODULE], ["commit", "-q", "-m", "Break an import"]):
        # As a developer commits, but with an identity of its own: a new machine has none.
        subprocess.run(["git", *identity, "-C", str(tree), *args], check=True)
    exported = run_cli("--patches", str(patches), "export", "--tree", str(tree), env=env)
    assert exported.returncode == 0, exported.stderr
    return patches, tree


@pytest.mark.needs_tree  # the scratch cache shares the session's base
def test_a_patch_that_does_not_apply_is_one_line(series, scratch, run_cli):
    """Before: the failed hunks on lines of their own under the error."""
    root, env = scratch
    patches = root / "unapplicable-patches"
    shutil.copytree(series.directory, patches)
    needle = "-    beta_val = tl.sigmoid(b_val).to(b.dtype.element_ty).to(tl.float32)\n"
    gate = next(patches / name for name in series.patches if needle in (patches / name).read_text())
    gate.write_text(gate.read_text().replace(needle, needle.replace("b_val", "b_value"), 1))
    proc = run_cli("--patches", str(patches), "tree", str(root / "tree"), env=env)
    log = assert_failed_on_one_line(
        proc,
        "tree",
        f"patch {gate.name} does not apply: python/sglang/kernels/ops/attention/fla/"
        "fused_recurrent.py: @@ -",
    )
    assert log.parent == root / "cache" / "logs"
    assert "patch failed: python/sglang/kernels/ops/attention/fla/fused_recurrent.py" in (
        log.read_text()
    )
    assert not (root / "tree").exists()


@pytest.mark.needs_tree  # the scratch cache shares the session's base
def test_a_failed_git_am_in_a_checkout_is_one_line(series, scratch, run_cli):
    """The user's git refuses the commits (here a hook; on a new machine, no identity).
    Before: git's output, a dozen lines for a missing identity, under the error."""
    root, env = scratch
    checkout = root / "checkout"
    subprocess.run(["git", "clone", "-q", str(base_repo(series)), str(checkout)], check=True)
    for key, value in (("user.name", "Reviewer"), ("user.email", "reviewer@example.com")):
        subprocess.run(["git", "-C", str(checkout), "config", key, value], check=True)
    hook = checkout / ".git" / "hooks" / "applypatch-msg"
    hook.write_text("#!/bin/sh\necho 'rejected by policy: no [GDN] subjects here' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True)
    log = assert_failed_on_one_line(
        run_cli("apply", str(checkout), env=env),
        "apply",
        "git am failed and the checkout was left as it was: rejected by policy: no [GDN] "
        "subjects here (git am's output: ",
    )
    assert "rejected by policy" in log.read_text()
    after = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True)
    assert after.stdout == head.stdout and not (checkout / ".git" / "rebase-apply").exists()


def test_a_failed_download_is_one_line(series, tmp_path, run_cli):
    """pip without an index or a config file fails as it does offline. Before: pip's
    ``ERROR:`` lines and the advice on lines of their own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        {"GDN_PARITY_CACHE": str(tmp_path / "cache"), "PIP_CONFIG_FILE": os.devnull,
         "PIP_NO_INDEX": "1"}
    )  # fmt: skip
    proc = run_cli("tree", str(tmp_path / "tree"), env=env)
    wheel = tmp_path / "cache" / "wheels" / series.wheel_name
    log = assert_failed_on_one_line(
        proc,
        "tree",
        f"could not download {series.base} ({series.wheel_name}): ERROR: No matching "
        f"distribution found for {series.base} (pip's output: ",
    )
    assert proc.stderr.endswith(f"; place the wheel at {wheel} to work offline\n")
    assert "Could not find a version that satisfies the requirement" in log.read_text()
    assert not (tmp_path / "tree").exists() and list(wheel.parent.iterdir()) == []


def test_an_empty_gdn_parity_cache_means_the_default_cache(series, tmp_path, run_cli):
    """``GDN_PARITY_CACHE=`` (set, but empty) is unset, as the README says: the cache is
    ``~/.cache/gdn-parity``, where the wheel is looked for and the log is kept."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        {"GDN_PARITY_CACHE": "", "HOME": str(tmp_path / "home"), "PIP_CONFIG_FILE": os.devnull,
         "PIP_NO_INDEX": "1"}
    )  # fmt: skip
    proc = run_cli("tree", str(tmp_path / "tree"), env=env, cwd=tmp_path)
    cache = tmp_path / "home" / ".cache" / "gdn-parity"
    log = assert_failed_on_one_line(proc, "tree", f"could not download {series.base}")
    assert log.parent == cache / "logs"
    assert proc.stderr.endswith(
        f"; place the wheel at {cache}/wheels/{series.wheel_name} to work offline\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.needs_tree  # the scratch cache shares the session's base
def test_a_patched_sglang_that_does_not_import_fails_smoke_on_one_line(broken_series, scratch,
                                                                       run_cli):  # fmt: skip
    """Before: the import's traceback under the error."""
    patches, tree = broken_series
    proc = run_cli("--patches", str(patches), "smoke", str(tree), env=scratch[1])
    log = assert_failed_on_one_line(
        proc,
        "smoke",
        f"importing the patched modules from {tree} failed: ModuleNotFoundError: No module "
        f"named '{MISSING}' (its output: ",
    )
    assert "Traceback" in log.read_text() and BROKEN_MODULE in log.read_text()
    assert proc.stdout == ""  # before: "patched modules import from TREE:", which they did not


@pytest.mark.slow
@pytest.mark.needs_tree
def test_a_crashed_demo_worker_is_one_line(broken_series, scratch, run_cli):
    """The worker of the series' variant cannot import its sglang. Before: its stderr's
    last 3000 characters (a traceback) under the error."""
    root, env = scratch
    patches, _ = broken_series
    out = root / "demo-out"
    proc = run_cli(
        "--patches", str(patches), "demo", "--variants", "exact-parity", "--tokens", "2",
        "--gammas", "1", "--accept-rates", "0.5", "--out", str(out), env=env,
    )  # fmt: skip
    log = assert_failed_on_one_line(
        proc,
        "demo",
        f"the worker of variant exact-parity failed: ModuleNotFoundError: No module named "
        f"'{MISSING}' (its stderr: ",
    )
    assert log.parent == root / "cache" / "logs"
    assert "Traceback" in log.read_text() and BROKEN_MODULE in log.read_text()
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.needs_tree
def test_workers_that_crash_alike_are_named_together(broken_series, scratch, run_cli):
    """Both variants of the series fail on one import. Before: the same error once per
    worker, joined on the line."""
    root, env = scratch
    patches, _ = broken_series
    proc = run_cli(
        "--patches", str(patches), "demo", "--variants", "beta-aligned,exact-parity",
        "--tokens", "2", "--gammas", "1", "--accept-rates", "0.5",
        "--out", str(root / "alike-out"), env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.splitlines()[-1]
    assert line.startswith(
        "gdn-parity demo: error: the workers of variants beta-aligned, exact-parity failed: "
        f"ModuleNotFoundError: No module named '{MISSING}' (their stderr: "
    ), proc.stderr
    assert line.count("ModuleNotFoundError") == 1
    logs = re.findall(r"(/\S+-worker-(\S+?)-\w+\.log)[,)]", line)
    assert [variant for _, variant in logs] == ["beta-aligned", "exact-parity"], line
    assert all(BROKEN_MODULE in Path(log).read_text() for log, _ in logs)


@pytest.mark.needs_tree
def test_an_exception_in_the_worker_pools_thread_is_one_line(scratch_cache, tmp_path, run_cli):
    """The cache's logs/ is a file, so the thread that would start the worker cannot make
    the worker's log. Before: threading's traceback of that thread on stderr, then an
    internal error about a KeyError (the job without a result) in place of the cause; then
    one line that said only "File exists"; now the line names logs/ and what to do."""
    (scratch_cache / "logs").write_text("not a directory\n")
    proc = run_cli(
        "demo", "--variants", "exact-parity", "--tokens", "2", "--gammas", "1",
        "--accept-rates", "0.5", "--out", str(tmp_path / "demo-out"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    *notes, error = proc.stderr.splitlines()
    assert all(is_note(line, "demo") for line in notes), proc.stderr
    logs = scratch_cache / "logs"
    assert error == (
        f"gdn-parity demo: error: {logs} is not a directory, so the cache has nowhere to keep "
        f"a failure's detail: remove it (rm {logs}) and retry, and gdn-parity makes logs/ again"
    )
    assert logs.read_text() == "not a directory\n"
    assert not (tmp_path / "demo-out").exists()
