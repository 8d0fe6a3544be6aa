"""sglang's SM90 probe, answered for one test.

The patched code asks ``get_platform().is_sm90``, which calls
``sglang.srt.utils.common.is_sm90_supported`` on every read. Replacing that probe
(restored by ``monkeypatch`` after the test) lets the CPU test bed check the rules
that only narrow tiles on SM90, through the same lookup the code makes.
"""

from __future__ import annotations

import pytest


def answer_sm90(monkeypatch: pytest.MonkeyPatch, sm90: bool) -> None:
    """Make ``get_platform().is_sm90`` answer ``sm90`` until the test ends."""
    from sglang.srt.utils import common

    monkeypatch.setattr(common, "is_sm90_supported", lambda: sm90)
