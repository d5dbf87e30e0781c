"""Running ``gpuconsole`` as a real non-root login (``nobody``) from tests that run as root.

Root prepares the files (a site folder, a users table, a home), then the command runs in a
subprocess under ``setpriv`` (or ``runuser``) with uid and gid 65534 and no supplementary groups.
The interpreter must be one ``nobody`` may execute (a Python under ``/root`` is not), of the same
version as the test's, with the test's packages on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

NOBODY = 65534
ROOT = Path(__file__).resolve().parent.parent
MAIN = "import sys; from gpuconsole.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _switch() -> list[str] | None:
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "nobody", "--"]
    return None


def _interpreter(switch: list[str]) -> str | None:
    """A Python of this version that ``nobody`` may run."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable), shutil.which(f"python{version}"),
                  f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    probe = f"import sys; assert sys.version_info[:2] == ({version.replace('.', ', ')})"
    for candidate in dict.fromkeys(c for c in candidates if c):
        try:
            done = subprocess.run([*switch, candidate, "-c", probe], capture_output=True, timeout=60, cwd="/")
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return candidate
    return None


def nobody_runner() -> tuple[list[str], str]:
    """The command prefix and interpreter, or a skip saying why neither exists."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to prepare root-owned site files and switch to the nobody login")
    switch = _switch()
    if switch is None:
        pytest.skip("neither setpriv nor runuser is installed: no way to run as a non-root login")
    python = _interpreter(switch)
    if python is None:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that the nobody login may run")
    return switch, python


def nobody_home() -> Path:
    """A fresh folder owned by ``nobody`` (outside root's private temporary folders)."""
    home = Path(tempfile.mkdtemp(prefix="gpuconsole-nobody-"))
    os.chown(home, NOBODY, NOBODY)
    return home


def run_as_nobody(argv: list[str], home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``gpuconsole ARGV`` as ``nobody``, with a clean environment whose XDG folders are in ``home``."""
    switch, python = nobody_runner()
    paths = [str(ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    base = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
            "XDG_CONFIG_HOME": str(home / "config"), "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME": str(home / "cache"),
            "PYTHONDONTWRITEBYTECODE": "1", "AWS_EC2_METADATA_DISABLED": "true",
            "KUBECONFIG": str(home / "no-kubeconfig"), "AWS_CONFIG_FILE": str(home / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials")}
    return subprocess.run([*switch, python, "-c", MAIN, *argv], capture_output=True, text=True, timeout=300,
                          cwd=str(home), env={**base, **(env or {})})
