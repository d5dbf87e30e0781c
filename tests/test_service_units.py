"""The systemd units gpuconsole prints keep every file their service writes under its
StateDirectory: ``ProtectSystem=strict`` and ``ProtectHome=read-only`` leave root's home
read-only, and an action whose audit record cannot be written never runs.

Each command runs as the unit would run it, in a mount namespace of its own (``unshare -m``):
the unit's ``Environment=`` lines, root's home remounted read-only, and ``/var/lib`` a fresh
folder (the StateDirectory systemd would make).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconsole.core.access.audit import AuditLog

ROOT = Path(__file__).resolve().parent.parent


def unit_environment(unit: str) -> dict[str, str]:
    return dict(line.removeprefix("Environment=").split("=", 1) for line in unit.splitlines()
                if line.startswith("Environment="))


def sandboxed(argv: list[str], unit: str, home: Path, var_lib: Path, config: Path) -> subprocess.CompletedProcess:
    """``gpuconsole ARGV`` with ``unit``'s environment, ``home`` read-only and ``var_lib`` as /var/lib."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare, to run a command with its home read-only as the unit does")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not permitted here: {probe.stderr.decode().strip()}")
    (var_lib / "gpuconsole").mkdir(mode=0o755, exist_ok=True)  # systemd makes the StateDirectory
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "gpuconsole", *argv])
    script = (f"mount --bind {shlex.quote(str(var_lib))} /var/lib && "
              f"mount --bind {shlex.quote(str(home))} {shlex.quote(str(home))} && "
              f"mount -o remount,ro,bind {shlex.quote(str(home))} {shlex.quote(str(home))} && exec {command}")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCONSOLE_", "XDG_"))}
    env = {**keep, "HOME": str(home), "GPUCONSOLE_CONFIG": str(config), "PYTHONPATH": str(ROOT),
           **unit_environment(unit)}
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                          env=env, cwd="/")


def test_the_autopilot_unit_records_its_actions_with_root_home_read_only(tmp_path: Path, capsys) -> None:
    from gpuconsole.cli.main import main

    assert main(["autopilot", "manifest", "--systemd"]) == 0
    unit = capsys.readouterr().out
    assert "ProtectHome=read-only" in unit and "StateDirectory=gpuconsole" in unit
    home, var_lib = tmp_path / "root-home", tmp_path / "var-lib"
    home.mkdir()
    var_lib.mkdir()
    config = tmp_path / "config.toml"
    config.write_text('[[rules]]\nname = "idle"\nkind = "idle-stop"\nscope = "all"\nidle_for = "30m"\n')
    ran = sandboxed(["autopilot", "run", "--once", "--cloud", "off", "--gpus", "off", "--jobs", "off"], unit, home,
                    var_lib, config)
    assert ran.returncode == 0, ran.stderr
    # An audited action in the same environment: its record lands under the StateDirectory.
    added = sandboxed(["budget", "add", "fleet", "--amount", "100"], unit, home, var_lib, config)
    assert added.returncode == 0, added.stderr
    [record] = [r for r in AuditLog(var_lib / "gpuconsole" / "state" / "gpuconsole" / "audit.db").records()
                if r.result != "started"]
    assert record.action == "budget-add" and record.target == "fleet"
    assert not any(home.rglob("*"))  # nothing was (or could be) written in the home


def test_the_sender_unit_keeps_its_state_under_the_state_directory_too(capsys) -> None:
    from gpuconsole.cli.main import main

    assert main(["notify", "manifest", "--systemd"]) == 0
    assert unit_environment(capsys.readouterr().out)["XDG_STATE_HOME"] == "/var/lib/gpuconsole/state"


@pytest.mark.parametrize("argv", [["audit", "relay", "manifest"], ["autopilot", "manifest", "--systemd"],
                                  ["notify", "manifest", "--systemd"]])
def test_every_printed_unit_is_one_systemd_accepts(argv: list[str], tmp_path: Path, capsys) -> None:
    """The bastion set-up installs these as printed (the relay's two split on their ``# path`` lines,
    as the README's command does): ``systemd-analyze verify`` finds nothing wrong in any."""
    from gpuconsole.cli.main import main

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    assert main(argv) == 0
    text = capsys.readouterr().out
    units: dict[str, list[str]] = {}
    name = f"gpuconsole-{argv[0]}.service"  # a single unit: the name the README gives it
    for line in text.splitlines():
        if line.startswith("# /etc/systemd/system/"):
            name = line.rsplit("/", 1)[1]
            continue
        units.setdefault(name, []).append(line)
    for name, lines in units.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    done = subprocess.run([analyze, "verify", "--man=no", *(str(tmp_path / n) for n in units)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
