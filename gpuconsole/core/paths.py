"""Where gpuconsole keeps its files, and the check that the database can live where asked.

The cache database goes in the user's cache directory because it can be deleted at any time;
configuration (themes, budgets) goes in the config directory and durable state (the audit log)
in the state directory, which a cache cleaner leaves alone.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import platformdirs


class StoreError(Exception):
    """The store cannot do its work for a reason the user must see; the message is one line."""


APP_NAME = "gpuconsole"
DB_ENV = "GPUCONSOLE_DB"


def default_db_path() -> Path:
    """``$GPUCONSOLE_DB`` when set, else ``gpuconsole.db`` in the user's cache directory."""
    override = os.environ.get(DB_ENV)
    if override:
        return Path(override).expanduser()
    return platformdirs.user_cache_path(APP_NAME) / "gpuconsole.db"


def config_dir() -> Path:
    """The user's configuration directory for gpuconsole (not created here)."""
    return platformdirs.user_config_path(APP_NAME)


def state_dir() -> Path:
    """The directory for state that must outlive a cache cleanup (not created here)."""
    return platformdirs.user_state_path(APP_NAME)


def check_db_path(path: Path) -> None:
    """Make sure a database can be created or opened at ``path`` before the console starts.

    Creates the missing directories on the way, since the store would create them anyway.

    Raises:
        StoreError: with a one-line message naming the path and why it cannot be written.
    """
    path = Path(path).expanduser()
    reason = _unwritable_reason(path)
    if reason is not None:
        raise StoreError(f"cannot write the database at {path}: {reason}")


def _unwritable_reason(path: Path) -> str | None:
    if path.is_dir():
        return "it is a directory"
    parent = path.parent
    ancestor = parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is not a directory"
    try:
        private_dir(parent)
    except OSError as exc:
        return f"cannot create {parent}: {exc.strerror or exc}"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return "the file is not readable and writable"
    try:
        # An anonymous file disappears on close, so the probe leaves nothing behind.
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        return f"cannot create files in {parent}: {exc.strerror or exc}"
    return None


# --------------------------------------------------------------------------- access and audit files

USERS_ENV = "GPUCONSOLE_USERS"
MFA_ENV = "GPUCONSOLE_MFA"
AUDIT_ENV = "GPUCONSOLE_AUDIT_DB"
DEMO_DIR_ENV = "GPUCONSOLE_DEMO_DIR"
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


SITE_USERS = Path("/etc/gpuconsole/users.json")


def users_path() -> Path:
    """``$GPUCONSOLE_USERS`` when set; else the bastion's table ``/etc/gpuconsole/users.json``
    when there is one (every login reads the same roles); else ``users.json`` in the user's
    configuration directory."""
    override = os.environ.get(USERS_ENV)
    if override:
        return Path(override).expanduser()
    if SITE_USERS.is_file():
        return SITE_USERS
    return config_dir() / "users.json"


def mfa_path() -> Path:
    """``$GPUCONSOLE_MFA`` when set, else ``mfa.json`` (the TOTP secrets) in the user's data directory."""
    override = os.environ.get(MFA_ENV)
    return Path(override).expanduser() if override else platformdirs.user_data_path(APP_NAME) / "mfa.json"


def audit_db_path() -> Path:
    """``$GPUCONSOLE_AUDIT_DB`` when set, else ``audit.db`` in the state directory (never the cache)."""
    override = os.environ.get(AUDIT_ENV)
    return Path(override).expanduser() if override else state_dir() / "audit.db"


def demo_dir() -> Path | None:
    """``$GPUCONSOLE_DEMO_DIR`` when set: where demos keep their own audit log and MFA state
    (None: each demo keeps them in a temporary folder of its own)."""
    override = os.environ.get(DEMO_DIR_ENV)
    return Path(override).expanduser() if override else None


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) readable by its owner only (0700); an existing
    directory gpuconsole made keeps working, tightened to 0700."""
    path = Path(path).expanduser()
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir(mode=PRIVATE_DIR, exist_ok=True)
        os.chmod(directory, PRIVATE_DIR)
    if not missing and path.is_dir() and path.name and APP_NAME in path.parts[-1]:
        try:
            os.chmod(path, PRIVATE_DIR)
        except OSError:
            pass
    return path


def private_file(path: Path) -> Path:
    """Make sure ``path`` exists and only its owner may read or write it (0600); its directory
    is created 0700 when missing."""
    path = Path(path).expanduser()
    private_dir(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, PRIVATE_FILE)
    os.close(fd)
    os.chmod(path, PRIVATE_FILE)
    return path


def write_private(path: Path, text: str, mode: int = PRIVATE_FILE) -> None:
    """Replace ``path`` with ``text`` atomically, the new file 0600 (or ``mode``) from its first byte."""
    path = Path(path).expanduser()
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, mode & PRIVATE_FILE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
