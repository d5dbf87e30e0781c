"""What ``pip install .`` ships from a clean clone: the package, its themes, styles and typing marker.

The slow test builds the distribution offline from a copy of the source tree (so the working tree
gets no ``build/`` or ``*.egg-info`` litter) and looks inside it.
"""

from __future__ import annotations

import configparser
import email.parser
import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import gpuconsole

REPO = Path(__file__).resolve().parent.parent
THEMES = ("contrast", "dark", "light")
NOT_PACKAGES = ("tests", "benchmarks", "screenshots", "themes")
IGNORED = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "*.pyc", "*.db*")


@dataclass(frozen=True)
class Distribution:
    """The files a build installs (paths relative to site-packages) and its metadata."""

    how: str
    files: frozenset[str]
    contents: dict[str, bytes]
    entry_points: str
    metadata: str


# --------------------------------------------------------------------------- the source tree


def source_files() -> list[str]:
    """The files a clean clone with the current changes would have (tracked, plus new unignored ones)."""
    if shutil.which("git") and (REPO / ".git").exists():
        result = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO, capture_output=True, text=True, check=False,
        )
        if result.returncode == 0:
            return sorted(name for name in result.stdout.split("\0") if name and (REPO / name).is_file())
    return sorted(
        str(p.relative_to(REPO))
        for p in REPO.rglob("*")
        if p.is_file() and not any(part.startswith(".") or part in ("build", "dist", "__pycache__") or part.endswith(".egg-info") for part in p.relative_to(REPO).parts)
    )


def copy_source(dest: Path) -> Path:
    names = source_files()
    if not names:
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(*IGNORED))
        return dest
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return dest


# --------------------------------------------------------------------------- building


def setuptools_dir(python: str) -> Path | None:
    """Where ``python``'s setuptools lives, or None without setuptools."""
    result = subprocess.run(
        [python, "-c", "import importlib.util as u; s = u.find_spec('setuptools'); print(s.submodule_search_locations[0] if s else '')"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    location = result.stdout.strip()
    return Path(location) if result.returncode == 0 and location else None


def can_build_wheels(python: str) -> bool:
    """setuptools ≥ 70.1 has ``bdist_wheel`` itself; older ones need the ``wheel`` package."""
    found = setuptools_dir(python)
    if found is None:
        return False
    if (found / "command" / "bdist_wheel.py").exists():
        return True
    result = subprocess.run([python, "-c", "import wheel.bdist_wheel"], capture_output=True, timeout=60, check=False)
    return result.returncode == 0


def run_quiet(cmd: list[str], cwd: Path) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"


def build_wheel(python: str, src: Path, out: Path) -> Distribution:
    """``pip wheel`` offline: the wheel ``pip install .`` would build and install."""
    run_quiet(
        [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(out), str(src)],
        cwd=out,
    )
    wheels = sorted(out.glob("gpuconsole-*.whl"))
    assert len(wheels) == 1, sorted(p.name for p in out.iterdir())
    with zipfile.ZipFile(wheels[0]) as whl:
        names = [n for n in whl.namelist() if not n.endswith("/")]
        contents = {n: whl.read(n) for n in names}
    dist_info = [n for n in names if n.split("/", 1)[0].endswith(".dist-info")]
    entry_points = next((contents[n].decode() for n in dist_info if n.endswith("/entry_points.txt")), "")
    metadata = next((contents[n].decode() for n in dist_info if n.endswith("/METADATA")), "")
    files = frozenset(n for n in names if n not in dist_info)
    return Distribution("wheel", files, {n: contents[n] for n in files}, entry_points, metadata)


def build_with_setuptools(python: str, src: Path, out: Path) -> Distribution:
    """What a wheel would hold, from setuptools' own ``build_py`` and ``egg_info`` steps.

    ``bdist_wheel`` runs these same steps with the same package discovery and package data; this
    route serves where neither setuptools ≥ 70.1 nor the ``wheel`` package is installed.
    """
    lib, egg = out / "lib", out / "egg"
    egg.mkdir()
    run_quiet(
        [python, "setup.py", "-q", "egg_info", "--egg-base", str(egg), "build_py", "--build-lib", str(lib)],
        cwd=src,
    )
    files = frozenset(str(p.relative_to(lib).as_posix()) for p in lib.rglob("*") if p.is_file() and p.suffix != ".pyc")
    infos = list(egg.glob("*.egg-info"))
    assert len(infos) == 1, infos
    entry_points = (infos[0] / "entry_points.txt").read_text() if (infos[0] / "entry_points.txt").exists() else ""
    metadata = (infos[0] / "PKG-INFO").read_text()
    return Distribution("setuptools build_py", files, {f: (lib / f).read_bytes() for f in files}, entry_points, metadata)


def build_distribution(python: str, work: Path) -> Distribution:
    if setuptools_dir(python) is None:
        pytest.skip(f"setuptools is not installed for {python}: cannot build gpuconsole offline")
    src = copy_source(work / "src")
    out = work / "out"
    out.mkdir()
    if can_build_wheels(python):
        return build_wheel(python, src, out)
    return build_with_setuptools(python, src, out)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Distribution:
    litter = [REPO / "build", REPO / "dist"]
    before = {p: p.exists() for p in litter}
    built = build_distribution(sys.executable, tmp_path_factory.mktemp("dist"))
    assert {p: p.exists() for p in litter} == before, "the build wrote into the working tree"
    return built


# --------------------------------------------------------------------------- what ships


@pytest.mark.slow
def test_the_themes_ship_inside_the_package(dist: Distribution) -> None:
    for theme in THEMES:
        name = f"gpuconsole/themes/{theme}.toml"
        assert name in dist.files, (dist.how, sorted(dist.files))
        assert dist.contents[name] == (REPO / "themes" / f"{theme}.toml").read_bytes()
        tomllib.loads(dist.contents[name].decode())
    shipped = {f for f in dist.files if f.startswith("gpuconsole/themes/")}
    assert shipped == {f"gpuconsole/themes/{p.name}" for p in (REPO / "themes").glob("*.toml")}


@pytest.mark.slow
def test_styles_and_the_typing_marker_ship(dist: Distribution) -> None:
    styles = [name for name in source_files() if name.startswith("gpuconsole/ui/") and name.endswith(".tcss")]
    assert "gpuconsole/ui/app.tcss" in styles
    missing = [name for name in styles if name not in dist.files]
    assert missing == [], dist.how
    assert "gpuconsole/py.typed" in dist.files


@pytest.mark.slow
def test_every_module_ships(dist: Distribution) -> None:
    modules = [name for name in source_files() if name.startswith("gpuconsole/") and name.endswith(".py")]
    assert "gpuconsole/cli/main.py" in modules
    missing = [name for name in modules if name not in dist.files]
    assert missing == [], dist.how


@pytest.mark.slow
def test_only_gpuconsole_is_installed(dist: Distribution) -> None:
    tops = {name.split("/", 1)[0] for name in dist.files}
    assert tops == {"gpuconsole"}, sorted(tops)
    for folder in NOT_PACKAGES:
        assert not any(name.startswith(f"{folder}/") for name in dist.files), folder
    assert not any(name.startswith("gpuconsole/tests/") for name in dist.files)


@pytest.mark.slow
def test_the_console_script_and_metadata(dist: Distribution) -> None:
    points = configparser.ConfigParser()
    points.read_string(dist.entry_points)
    assert points.has_section("console_scripts"), dist.entry_points
    assert points.get("console_scripts", "gpuconsole").strip() == "gpuconsole.cli.main:main"
    metadata = email.parser.Parser().parsestr(dist.metadata)
    assert metadata["Name"] == "gpuconsole"
    assert metadata["Version"] == gpuconsole.__version__
    assert metadata["Requires-Python"] == ">=3.11"


# --------------------------------------------------------------------------- fast checks of the configuration


def test_the_version_is_the_same_everywhere() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == gpuconsole.__version__


def test_the_console_script_points_at_main() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    target = project["scripts"]["gpuconsole"]
    module, _, attr = target.partition(":")
    assert importlib.util.find_spec(module) is not None
    assert callable(getattr(__import__(module, fromlist=[attr]), attr))


def test_package_data_covers_every_data_file() -> None:
    """Every non-Python file in the package matches a package-data pattern, so it ships."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    package_data = config["tool"]["setuptools"]["package-data"]
    unshipped = []
    for name in source_files():
        path = Path(name)
        if path.parts[0] != "gpuconsole" or path.suffix in (".py", ".pyc"):
            continue
        package = ".".join(path.parent.parts)
        if not any(path.match(pattern) for pattern in package_data.get(package, [])):
            unshipped.append(name)
    assert unshipped == []
