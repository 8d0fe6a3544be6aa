"""Every path of this repository that the README, docs/*.md, the PR texts (docs/pr/),
benchmark/README.md, the studies' README and pyproject.toml name exists.

Paths of sglang's tree (``python/sglang/...``, ``test/registered/...``, its docs) are
not this repository's and are left alone. The measured pages under ``benchmark/results/``
are not read: they record what ran when they were written.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "benchmark" / "README.md"]
    + [ROOT / "benchmark" / "gpu" / "studies" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "docs" / "pr").glob("*.md"))
)
# A path from the repository's top, as the documents write it (a glob such as patches/*.patch
# counts when it matches).
PATH = re.compile(r"(?<![\w/.-])((?:benchmark|docs|patches|python|test)/[\w./*-]*[\w*/])")
SGLANGS = (
    "python/sglang",
    "test/registered/",
    "test/run_suite.py",
    "docs/docs/",
    "docs/docs.json",
    "docs/advanced_features/",
    "docs/references/",
)


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` names, less sglang's."""
    return [p for p in PATH.findall(text) if not p.startswith(SGLANGS)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists(document):
    named = named_paths(document.read_text())
    missing = sorted({p for p in named if not list(ROOT.glob(p))})
    assert not missing, f"{document.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_rule_finds_paths_and_leaves_sglangs_alone():
    text = (
        "see `test/helpers/cli.py`, [page](benchmark/results/x.md#2-y), patches/*.patch, "
        "python/sglang/srt/environ.py and test/registered/unit/test_x.py"
    )
    assert named_paths(text) == [
        "test/helpers/cli.py",
        "benchmark/results/x.md",
        "patches/*.patch",
    ]
