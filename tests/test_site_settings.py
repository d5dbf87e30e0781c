"""Site settings win: a non-root login cannot replace the bastion's users table, ``[access]`` or
``[audit]`` by environment variables or flags; root and the file's owner may.

The files are prepared by root and ``gpuconsole`` runs as the real ``nobody`` login
(:mod:`tests.nonroot`); the site folder is named by ``GPUCONSOLE_SITE_DIR``, which is honoured
only because root owns it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuconsole.core import paths
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.site import load_site, resolve
from tests.nonroot import NOBODY, nobody_home, nobody_runner, run_as_nobody


@pytest.fixture
def site() -> Iterator[Path]:
    """A root-owned site folder (0755) with a users table naming nobody a developer (0644)."""
    folder = Path(tempfile.mkdtemp(prefix="gpuconsole-site-"))
    os.chmod(folder, 0o755)
    table = {"users": {"nobody": {"role": "developer", "namespaces": ["team-nlp"]}, "root": {"role": "admin"}}}
    (folder / "users.json").write_text(json.dumps(table))
    os.chmod(folder / "users.json", 0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home() -> Iterator[Path]:
    nobody_runner()  # skips, saying why, where no non-root login can be used
    folder = nobody_home()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def own_admin_table(home: Path) -> Path:
    """A users table nobody wrote itself, making itself admin."""
    mine = home / "mine.json"
    mine.write_text(json.dumps({"users": {"nobody": {"role": "admin"}}}))
    os.chown(mine, NOBODY, NOBODY)
    return mine


def you(run) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["you"]


def refusal(run) -> str:
    """The one line a refused command printed (no traceback)."""
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr
    return run.stderr


def test_the_site_table_binds_a_non_root_login(site, home) -> None:
    run = run_as_nobody(["users", "list", "--json"], home, {"GPUCONSOLE_SITE_DIR": str(site)})
    assert you(run) == {"name": "nobody", "role": "developer", "managed": True}


def test_a_non_root_login_cannot_replace_the_site_table_and_the_attempt_is_audited(site, home) -> None:
    mine = own_admin_table(home)
    env = {"GPUCONSOLE_SITE_DIR": str(site), "GPUCONSOLE_USERS": str(mine)}
    err = refusal(run_as_nobody(["users", "list", "--json"], home, env))
    assert err.startswith("gpuconsole: error: GPUCONSOLE_USERS may not replace the site's setting")
    assert f"({site / 'users.json'})" in err
    records = AuditLog(home / "state" / "gpuconsole" / "audit.db").records()
    assert [(r.actor, r.role, r.action, r.result.split(":")[0]) for r in records] == [
        ("nobody", "developer", "site-override", "denied")]


def test_a_missing_table_named_by_a_non_root_login_grants_nothing(site, home) -> None:
    missing = home / "missing.json"
    env = {"GPUCONSOLE_SITE_DIR": str(site), "GPUCONSOLE_USERS": str(missing)}
    refusal(run_as_nobody(["users", "init", "--no-qr"], home, env))
    assert not missing.exists()
    assert json.loads((site / "users.json").read_text())["users"]["nobody"]["role"] == "developer"


def test_the_login_name_comes_from_the_uid_not_the_environment(site, home) -> None:
    env = {"GPUCONSOLE_SITE_DIR": str(site), "LOGNAME": "root", "USER": "root", "GPUCONSOLE_LOGIN": "root"}
    assert you(run_as_nobody(["users", "list", "--json"], home, env))["name"] == "nobody"


def test_the_owner_of_the_site_table_may_point_elsewhere(site, home) -> None:
    os.chown(site / "users.json", NOBODY, NOBODY)
    env = {"GPUCONSOLE_SITE_DIR": str(site), "GPUCONSOLE_USERS": str(own_admin_table(home))}
    assert you(run_as_nobody(["users", "list", "--json"], home, env))["role"] == "admin"


def test_the_site_audit_and_access_tables_cannot_be_replaced(site, home) -> None:
    shared = home / "site-audit"
    shared.mkdir()
    os.chown(shared, NOBODY, NOBODY)
    (site / "config.toml").write_text(f'[access]\nusers = "{site / "users.json"}"\n\n[audit]\ndb = "{shared}/{{login}}.db"\n')
    os.chmod(site / "config.toml", 0o644)
    mine = home / "mine.toml"
    mine.write_text(f'[audit]\ndb = "{home / "quiet.db"}"\n')
    os.chown(mine, NOBODY, NOBODY)
    base = {"GPUCONSOLE_SITE_DIR": str(site)}
    err = refusal(run_as_nobody(["--config", str(mine), "users", "list"], home, base))
    assert f"{mine} declares [audit], which the site's {site / 'config.toml'} sets" in err
    err = refusal(run_as_nobody(["users", "list"], home, {**base, "GPUCONSOLE_AUDIT_DB": str(home / "quiet.db")}))
    assert "GPUCONSOLE_AUDIT_DB may not replace the site's setting" in err
    err = refusal(run_as_nobody(["users", "list"], home, {**base, "GPUCONSOLE_MFA": str(home / "my-mfa.json")}))
    assert "GPUCONSOLE_MFA may not replace the site's setting" in err
    assert not (home / "quiet.db").exists()
    records = AuditLog(shared / "nobody.db").records()
    assert [r.action for r in records] == ["site-override"] * 3 and {r.actor for r in records} == {"nobody"}


def test_one_audit_log_for_every_login_is_refused_naming_the_key(site, home) -> None:
    """A shared ``[audit] db`` would be created 0600 by the first login and lock out the rest."""
    shared = home / "site-audit"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (site / "config.toml").write_text(f'[audit]\ndb = "{shared / "audit.db"}"\n')
    os.chmod(site / "config.toml", 0o644)
    done = run_as_nobody(["users", "list"], home, {"GPUCONSOLE_SITE_DIR": str(site)})
    assert done.returncode != 0 and done.stderr.count("\n") == 1
    assert "[audit] db = " in done.stderr and "per-login path" in done.stderr
    assert not (shared / "audit.db").exists()


def test_a_per_login_audit_log_in_a_folder_others_may_write_is_refused(site, home) -> None:
    """``/tmp/{login}.db`` is per login by name only: another login could create it first (a
    planted file, owned by them) and lock this one out, on purpose."""
    shared = home / "world-writable"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (site / "config.toml").write_text(f'[audit]\ndb = "{shared}/{{login}}.db"\n')
    os.chmod(site / "config.toml", 0o644)
    done = run_as_nobody(["users", "list"], home, {"GPUCONSOLE_SITE_DIR": str(site)})
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "[audit] db = " in done.stderr and f"another login may write {shared}" in done.stderr
    assert not (shared / "nobody.db").exists()


def test_root_may_point_elsewhere(site, tmp_path, monkeypatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(site))
    monkeypatch.setenv("GPUCONSOLE_USERS", str(tmp_path / "own.json"))
    files, refused = resolve()
    assert (files.users, refused) == (tmp_path / "own.json", [])
    assert resolve(euid=NOBODY)[0].users == site / "users.json"


def test_the_site_folder_variable_names_only_a_folder_root_owns(tmp_path, monkeypatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a folder another login owns")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "users.json").write_text("{}")
    os.chown(theirs, NOBODY, NOBODY)
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(theirs))
    assert paths.site_dir() == paths.SITE_DIR
    os.chown(theirs, 0, 0)
    os.chmod(theirs, 0o777)  # root's, but anyone may plant files in it
    assert paths.site_dir() == paths.SITE_DIR
    os.chmod(theirs, 0o755)
    assert paths.site_dir() == theirs and load_site().users == theirs / "users.json"


def test_a_log_another_login_may_not_read_cannot_be_verified_rather_than_tampered(tmp_path, home) -> None:
    """An auditor's verify of a file it may not read says so (exit 3), never TAMPERED."""
    log = AuditLog(tmp_path / "root-only" / "audit.db")
    log.append("root", "admin", "stop", "i-0123456789abcdef0", (), "ok")
    for where in (log.path, tmp_path / "root-only" / "missing.db"):
        done = run_as_nobody(["audit", "verify"], home, {"GPUCONSOLE_AUDIT_DB": str(where)})
        assert done.returncode == 3, done.stderr
        assert "cannot be verified" in done.stderr and "TAMPERED" not in done.stderr
    assert log.verify().ok  # its owner verifies it


def test_the_sites_tls_floor_binds_a_login_whose_own_config_lowers_it(site, home) -> None:
    """The bastion set-up puts ``[tls]`` in the site config with the tables that bind every login:
    nobody's own file saying ``min_version = "1.2"`` does not lower the site's TLS 1.3."""
    (site / "config.toml").write_text('[tls]\nmin_version = "1.3"\n')
    os.chmod(site / "config.toml", 0o644)
    mine = home / "own.toml"
    mine.write_text('[tls]\nmin_version = "1.2"\n')
    os.chown(mine, NOBODY, NOBODY)
    done = run_as_nobody(["--config", str(mine), "access", "whoami", "--json"], home, {"GPUCONSOLE_SITE_DIR": str(site)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tls"]["min_version"] == "TLSv1.3"
    (site / "config.toml").unlink()  # without the site's table, the login's own file decides
    done = run_as_nobody(["--config", str(mine), "access", "whoami", "--json"], home, {"GPUCONSOLE_SITE_DIR": str(site)})
    assert json.loads(done.stdout)["tls"]["min_version"] == "TLSv1.2"
