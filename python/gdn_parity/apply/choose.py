"""Which kind of target a path is: a git checkout or an installed package.

Apart from ``target``, which both kinds import, so that imports run one way.
"""

from __future__ import annotations

from pathlib import Path

from gdn_parity.apply.checkout import CheckoutTarget
from gdn_parity.apply.package import PackageTarget
from gdn_parity.apply.target import Target
from gdn_parity.errors import GdnParityError
from gdn_parity.queue.git import is_git_repo
from gdn_parity.queue.series import Series


def open_target(path: Path, series: Series) -> Target:
    """A git checkout's top level is a checkout; any other directory an installed package.

    The target is checked (``Target.check``) before it is returned.
    """
    if not path.exists():
        raise GdnParityError(f"{path} does not exist")
    if not path.is_dir():
        raise GdnParityError(f"{path} is not a directory: name an sglang checkout or package")
    target: Target = (
        CheckoutTarget(path, series) if is_git_repo(path) else PackageTarget(path, series)
    )
    target.check()
    return target
