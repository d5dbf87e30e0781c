"""The rules of the house, held by import-linter's contracts in pyproject.toml.

The first test checks the package as it is. The others plant one forbidden import in a copy of
the package and check that the contracts catch it, so a contract that silently stopped checking
(a typo in a module name, a dropped contract) fails here too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def lint(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LINT, "--no-cache", *args], cwd=where, env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def test_every_contract_is_kept() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
    for contract in ("Arrows point down", "The UI reaches no backend", "never import Textual",
                     "The model imports nothing", "No import circles", "Only an adapter's own folder",
                     "The core imports no adapter"):
        assert contract in done.stdout.replace("\n", " ").replace("  ", " "), contract


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tree")
    shutil.copytree(ROOT / "gpuconsole", where / "gpuconsole", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


# ({module: the import planted in it}, the contract that must catch it)
PLANTED = [
    ({"ui/panes/gpus.py": "from gpuconsole.backends.nvml import NvmlSource"}, "ui-no-drivers"),
    ({"ui/format.py": "import boto3"}, "ui-no-drivers"),
    ({"core/money/costs.py": "from gpuconsole.ui import format"}, "layers"),
    ({"backends/aws/mapping.py": "from gpuconsole.core.money import costs"}, "layers"),
    ({"model/fleet.py": "from gpuconsole.core import paths"}, "layers"),
    ({"model/jobs.py": "import psutil"}, "model-alone"),
    ({"core/fleet/hub.py": "import textual"}, "no-textual-below-ui"),
    # a circle between two modules of one folder, one half behind TYPE_CHECKING
    ({"core/money/idle.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuconsole.core.money import usage",
      "core/money/usage.py": "from gpuconsole.core.money import idle"}, "no-circles"),
    # a folder importing one above it (money is below ops)
    ({"core/money/catalog.py": "from gpuconsole.core.ops import actions"}, "no-circles"),
    ({"core/fleet/sources.py": "from gpuconsole.backends.kube.mapping import job_record"}, "adapter-faces"),
    # the core reaches an adapter through its face instead of the registry, even inside a function
    ({"core/access/rbac.py": "def planted():\n    from gpuconsole.backends.kube import KubeJobs"}, "core-no-adapters"),
    ({"core/fleet/console.py": "from gpuconsole.backends import sim"}, "core-no-adapters"),
]


@pytest.mark.parametrize(("planted", "contract"), PLANTED, ids=[f"{c}:{next(iter(p))}" for p, c in PLANTED])
def test_a_planted_import_breaks_its_contract(copy: Path, planted: dict[str, str], contract: str) -> None:
    for module, statement in planted.items():
        target = copy / "gpuconsole" / module
        target.write_text(target.read_text() + "\n" + statement + "\n")
    try:
        done = lint(copy, "--contract", contract)
    finally:
        for module in planted:
            shutil.copy(ROOT / "gpuconsole" / module, copy / "gpuconsole" / module)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-1000:]
    assert "BROKEN" in done.stdout


def test_an_adapter_face_shows_what_its_module_holds_now(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuconsole.backends.kube as face
    import gpuconsole.backends.kube.source as source

    class Stand:
        pass

    real = source.KubeJobs
    assert face.KubeJobs is real and "KubeJobs" in face.__all__
    monkeypatch.setattr(source, "KubeJobs", Stand)
    assert face.KubeJobs is Stand  # a replaced class is seen through the face, and only while replaced
    monkeypatch.undo()
    assert face.KubeJobs is real
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        face.nothing_here  # noqa: B018
