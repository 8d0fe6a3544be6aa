"""git as gdn-parity runs it."""

from __future__ import annotations

import subprocess

import pytest

from gdn_parity.errors import GdnParityError
from gdn_parity.queue.git import git


def test_a_failed_git_command_is_one_line_without_hints(tmp_path):
    """The error reaches the user as gdn-parity's one line on stderr."""
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("ignored.txt\n")
    (tmp_path / "ignored.txt").write_text("")
    with pytest.raises(GdnParityError) as err:
        git(tmp_path, "add", "ignored.txt")  # git explains on two lines and adds hints
    assert str(err.value) == (
        f"git add ignored.txt failed in {tmp_path}: The following paths are ignored by one "
        "of your .gitignore files:; ignored.txt"
    )
