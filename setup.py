"""Two facts a ``pip install`` of this folder bundles into the package (pyproject.toml has the
rest): benchlib's own configs (``config/`` as ``benchlib/_home/config``, so paper grids, paper
values and reference digests resolve wherever benchlib runs: benchlib.primitives.home), and where the code
came from (``benchlib/_origin.json``: the git commit of the clone it was built from, and whether
the clone had uncommitted changes; benchlib.facts.provenance). An editable install needs neither: it
runs from the checkout itself."""

import json
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _origin() -> dict:
    commit = _git("rev-parse", "HEAD") if (HERE / ".git").exists() else None
    if not commit:  # an sdist or an exported tree: the package version is all there is
        return {"commit": None, "dirty": None, "installed_from": "package"}
    status = _git("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None else bool(status)
    return {"commit": commit, "dirty": dirty, "installed_from": "git clone"}


class BuildWithOrigin(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        package = Path(self.build_lib) / "benchlib"
        home = package / "_home" / "config"
        if home.exists():
            shutil.rmtree(home)
        if (HERE / "config").is_dir():
            shutil.copytree(HERE / "config", home)
        (package / "_origin.json").write_text(json.dumps(_origin(), sort_keys=True) + "\n")


setup(cmdclass={"build_py": BuildWithOrigin})
