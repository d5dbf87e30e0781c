"""The README's "Setting up a shared bastion", step by step as a new operator does it, with each
step's check: root runs the commands, the site config is the README's own block (paths moved to
a scratch site folder named by ``GPUCONSOLE_SITE_DIR``, which root may do), and a second, real
login (``nobody``, through ``setpriv``) checks what it may and may not do. No AWS account and no
systemd here: the relay runs as the command its unit starts, and the copies it ships wait queued.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.mfa import code_at
from tests.nonroot import nobody_home, nobody_runner, run_as_nobody
from tests.test_audit_relay import start_relay

README = Path(__file__).resolve().parent.parent / "README.md"


def site_config_block() -> str:
    """The TOML of step 4 of the README's bastion set-up, as printed there."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Setting up a shared bastion"):]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block is not None, "the bastion set-up has no site config block"
    return "\n".join(line.removeprefix("   ") for line in block.group(1).splitlines()) + "\n"


@pytest.fixture
def bastion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    nobody_runner()  # skips, saying why, where no second login can be used
    where = Path(tempfile.mkdtemp(prefix="gpuconsole-bastion-"))
    os.chmod(where, 0o755)
    site = where / "etc-gpuconsole"
    root_home = tmp_path / "root"
    root_home.mkdir()
    for variable in ("GPUCONSOLE_USERS", "GPUCONSOLE_MFA", "GPUCONSOLE_AUDIT_DB", "GPUCONSOLE_CONFIG",
                     "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(site))
    monkeypatch.setenv("HOME", str(root_home))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(root_home / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(root_home / "no-aws-credentials"))
    home = nobody_home()
    yield {"where": where, "site": site, "home": home}
    shutil.rmtree(where, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


def gpuconsole(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``sudo gpuconsole ARGV``: root, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "gpuconsole", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_the_readmes_bastion_set_up_step_by_step(bastion: dict[str, Path]) -> None:
    site, home, where = bastion["site"], bastion["home"], bastion["where"]
    login = {"GPUCONSOLE_SITE_DIR": str(site)}

    # 1. The site folder, owned by root. Check: root 755.
    done = subprocess.run(["install", "-d", "-m", "755", "-o", "root", "-g", "root", str(site)], capture_output=True)
    assert done.returncode == 0, done.stderr
    found = site.stat()
    assert (found.st_uid, stat.S_IMODE(found.st_mode)) == (0, 0o755)

    # 2. The users table: root the first admin, a code opens the window, the logins added.
    users = site / "users.json"
    done = gpuconsole("users", "init", env={"GPUCONSOLE_USERS": str(users)})
    assert done.returncode == 0 and "root is now admin" in done.stdout, done.stderr
    secret = re.search(r"secret=([A-Z2-7]+)", done.stdout).group(1)
    os.chmod(users, 0o644)
    assert gpuconsole("users", "mfa", "verify", code_at(secret, time.time())).returncode == 0
    added = gpuconsole("users", "add", "nobody", "--role", "developer", "--namespace", "team-nlp")
    assert added.returncode == 0, added.stderr
    listed = run_as_nobody(["users", "list"], home, login)  # Check: as any login
    assert listed.returncode == 0 and re.search(r"nobody \(you\)\s+developer\s+team-nlp", listed.stdout), listed.stderr
    assert stat.S_IMODE(users.stat().st_mode) == 0o644 and users.stat().st_uid == 0  # only root changes it
    assert run_as_nobody(["users", "add", "nobody", "--role", "admin"], home, login).returncode != 0

    # 4. The site config: the README's block, root's, 0644 (its paths moved to the scratch folder).
    socket_path = where / "run" / "audit.sock"
    (where / "run").mkdir(mode=0o755)
    text = site_config_block()
    assert 'relay = "/run/gpuconsole/audit.sock"' in text and 'users = "/etc/gpuconsole/users.json"' in text
    config = site / "config.toml"
    config.write_text(text.replace("/run/gpuconsole/audit.sock", str(socket_path))
                      .replace("/etc/gpuconsole/users.json", str(users)))
    os.chmod(config, 0o644)
    # Check: the login's role and the TLS floor; its own audit log refused; nothing runs before the relay.
    whoami = run_as_nobody(["access", "whoami", "--json", "--cloud", "off"], home, login)
    assert whoami.returncode == 0, whoami.stderr
    you = json.loads(whoami.stdout)
    assert you["gpuconsole"]["role"] == "developer" and you["tls"]["min_version"] == "TLSv1.3"
    refused = run_as_nobody(["users", "list"], home, {**login, "GPUCONSOLE_AUDIT_DB": str(home / "mine.db")})
    assert refused.returncode == 1 and "GPUCONSOLE_AUDIT_DB may not replace the site's setting" in refused.stderr
    budget = ["budget", "add", "team", "--amount", "100", "--db", str(home / "cache.db")]
    down = run_as_nobody(budget, home, login)
    assert down.returncode != 0 and "audit relay" in down.stderr and "cannot be reached" in down.stderr

    # 5. The audit relay, as its unit runs it (root, the site config).
    db = where / "var-lib" / "audit-relay.db"
    server = start_relay(socket_path, db, {**os.environ})
    try:
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o666
        acted = run_as_nobody(budget, home, login)  # a developer: denied, and recorded as nobody's
        assert acted.returncode != 0 and "only an admin may budget-add" in acted.stderr, acted.stderr
        records = AuditLog(db).records()
        assert [(r.actor, r.action) for r in records][-1] == ("nobody", "budget-add")
        assert records[-1].result.startswith("denied")
        # Check: root reads the relay's chain (a developer may not).
        listed = gpuconsole("audit", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert ("nobody", "budget-add") in {(r["actor"], r["action"]) for r in json.loads(listed.stdout)["records"]}
        assert run_as_nobody(["audit", "list"], home, login).returncode != 0
        # Check: root's verify holds the relay's chain against its copy; with no AWS account here the
        # copy cannot be read, which is its own answer (exit 3), naming the relay, never TAMPERED.
        verified = gpuconsole("audit", "verify")
        assert verified.returncode == 3, verified.stderr
        assert "cannot be verified: cannot read the remote copy" in verified.stderr
        assert f"the relay's chain, through {socket_path}" in verified.stderr and "TAMPERED" not in verified.stderr
    finally:
        server.terminate()
        server.wait(10)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
