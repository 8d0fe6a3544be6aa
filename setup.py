"""One build step beyond pyproject.toml: the wheel ships the series as package data.

``patches/`` at the top of the repository stays the single source: a wheel (or a
non-editable ``pip install``) copies it to ``gdn_parity/_patches/`` at build time.
An editable install copies nothing; the tool reads the checkout's ``patches/``.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PATCHES = Path(__file__).resolve().parent / "patches"
PACKAGED = Path("gdn_parity") / "_patches"


class BuildPyWithSeries(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / PACKAGED
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(PATCHES, target)


setup(cmdclass={"build_py": BuildPyWithSeries})
