from __future__ import annotations

import pytest

from helpers.server_rig import Rig


@pytest.fixture
def rig(tmp_path) -> Rig:
    """A fake sglang tree, model and drafts, and the runner's CLI over them."""
    return Rig(tmp_path)
