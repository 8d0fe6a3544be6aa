"""The help a user sees: a description, every option explained, choices shown, --version."""

from __future__ import annotations

import argparse

import pytest

from gdn_parity import __version__
from gdn_parity.cli.drift_verbs import DEMO_VARIANTS
from gdn_parity.cli.main import build_parser
from gdn_parity.drift.model.config import SIZES
from gdn_parity.drift.run.variants import VARIANTS
from helpers.cli import assert_refused


def test_version(run_cli):
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"gdn-parity {__version__}\n"


@pytest.mark.parametrize(
    "args,extra",
    [
        (["--version", "junk"], "junk"),
        (["--version", "status", "x"], "status x"),
        (["--patches", "x", "--version"], "--patches x"),
        (["--vers", "junk"], "junk"),
    ],
)
def test_version_with_other_arguments_is_a_usage_error(args, extra, run_cli):
    """Before: argparse's version action printed the version and exited 0, whatever followed."""
    proc = run_cli(*args)
    assert_refused(
        proc,
        f"gdn-parity: error: argument --version: takes no other arguments: {extra} "
        "(see gdn-parity --help)",
    )
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "args,help_of",
    [
        (["--help", "--version"], []),
        (["--version", "--help"], []),
        (["--version", "-h"], []),
        (["--vers", "--he"], []),
        (["--version", "demo", "--help"], ["demo"]),
        (["demo", "--help", "--version"], ["demo"]),
    ],
)
def test_help_beside_version_prints_the_help_in_either_order(args, help_of, run_cli):
    """One rule: --help answers, whatever its place. Before: ``--help --version`` printed the
    help, and ``--version --help`` was refused as --version with another argument."""
    proc = run_cli(*args)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    assert proc.stdout == run_cli(*help_of, "--help").stdout
    assert proc.stdout.startswith(f"usage: {' '.join(['gdn-parity', *help_of])} [-h]")


def test_the_top_level_says_what_the_tool_is_and_its_exit_codes(run_cli):
    out = " ".join(run_cli("--help").stdout.split())
    assert "``" not in out and "command line." not in out
    assert "speculative decoding on hybrid GDN models" in out
    assert '1 "diverged / parity broken"' in out and "130" in out


@pytest.mark.parametrize("verb", ["demo", "harness-server"])
def test_every_drift_option_has_help_and_choices(verb, run_cli):
    out = " ".join(run_cli(verb, "--help").stdout.split())
    assert f"--size {{{','.join(sorted(SIZES))}}}" in out
    assert "--device {cpu,cuda}" in out and "--ssm-dtype {bfloat16,float16,float32}" in out
    assert "dtype of the GDN state pool" in out and "or cuda" in out
    if verb == "harness-server":
        names = [v.name for v in VARIANTS if not v.deterministic]
        assert "--variant {" + ",".join(names) + "}" in out
    else:
        assert all(v.name in out.split("--variants VARIANTS", 1)[1] for v in VARIANTS)


@pytest.mark.parametrize("verb", ["apply", "status"])
def test_apply_and_status_explain_python(verb, run_cli):
    out = " ".join(run_cli(verb, "--help").stdout.split())
    assert "--python PYTHON the sglang that this interpreter imports" in out


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_every_verb_and_option_has_help(verb):
    parser = _verbs()[verb]
    assert parser.description, f"{verb} has no description"
    undocumented = [a.option_strings or [a.dest] for a in parser._actions if not a.help]
    assert undocumented == [], f"{verb}: options without help"


def test_the_demo_is_summed_up_by_its_variants_not_a_count(run_cli):
    """The demo runs any of the variants (five configurations and the isolating runs)."""
    top = " ".join(run_cli("--help").stdout.split())
    summary = top.split(" demo ", 1)[1].split(" cost ", 1)[0]
    assert summary == "Base vs DSpark-style verify on a hybrid GDN model, per numerics variant"
    demo = " ".join(run_cli("demo", "--help").stdout.split())
    assert f"(--variants; by default {', '.join(DEMO_VARIANTS['rowwise'])} on the row-wise" in demo
    assert f"{', '.join(DEMO_VARIANTS['server'])} on the server stack" in demo
