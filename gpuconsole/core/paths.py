"""Where gpuconsole keeps its files, and the check that the database can live where asked.

The cache database goes in the user's cache directory because it can be deleted at any time;
configuration (themes, budgets) goes in the config directory and durable state (the audit log)
in the state directory, which a cache cleaner leaves alone.
"""

from __future__ import annotations

import os
import stat
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


SITE_DIR = Path("/etc/gpuconsole")
SITE_DIR_ENV = "GPUCONSOLE_SITE_DIR"
SITE_USERS_NAME = "users.json"
SITE_CONFIG_NAME = "config.toml"


def site_dir() -> Path:
    """The bastion's settings folder: ``/etc/gpuconsole``.

    ``$GPUCONSOLE_SITE_DIR`` names another one only while ``/etc/gpuconsole`` holds no settings
    and only when that folder is root's (owned by root, writable by nobody else): a login cannot
    make such a folder, so the variable can neither hide the site's settings nor bring its own.
    Root prepares such folders for tests and for trying a set-up out.
    """
    override = os.environ.get(SITE_DIR_ENV)
    if not override or holds_site_settings(SITE_DIR):
        return SITE_DIR
    path = Path(override)
    try:
        info = os.stat(path)
    except OSError:
        return SITE_DIR
    if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o022:
        return path
    return SITE_DIR


def holds_site_settings(folder: Path) -> bool:
    """Whether ``folder`` has a users table or a config file (one gpuconsole cannot even look
    at counts as there: settings hidden from a login still bind it)."""
    for name in (SITE_USERS_NAME, SITE_CONFIG_NAME):
        try:
            os.lstat(folder / name)
            return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def users_path() -> Path:
    """``$GPUCONSOLE_USERS`` when set; else the bastion's table ``/etc/gpuconsole/users.json``
    when there is one (every login reads the same roles); else ``users.json`` in the user's
    configuration directory. Whether the variable may replace the site's table is decided by
    :mod:`gpuconsole.core.access.site`."""
    override = os.environ.get(USERS_ENV)
    if override:
        return Path(override).expanduser()
    site = site_dir() / SITE_USERS_NAME
    try:
        os.lstat(site)
        return site
    except FileNotFoundError:
        return config_dir() / "users.json"
    except OSError:
        return site  # there but hidden from this login: it still binds (and grants nothing unread)


def mfa_path() -> Path:
    """``$GPUCONSOLE_MFA`` when set, else ``mfa.json`` (the TOTP secrets) in the user's data directory."""
    override = os.environ.get(MFA_ENV)
    return Path(override).expanduser() if override else default_mfa_path()


def default_mfa_path() -> Path:
    """``mfa.json`` in the user's data directory, whatever the environment says."""
    return platformdirs.user_data_path(APP_NAME) / "mfa.json"


def audit_db_path() -> Path:
    """``$GPUCONSOLE_AUDIT_DB`` when set, else ``audit.db`` in the state directory (never the cache)."""
    override = os.environ.get(AUDIT_ENV)
    return Path(override).expanduser() if override else state_dir() / "audit.db"


def demo_dir() -> Path | None:
    """``$GPUCONSOLE_DEMO_DIR`` when set: where demos keep their own audit log and MFA state
    (None: each demo keeps them in a temporary folder of its own)."""
    override = os.environ.get(DEMO_DIR_ENV)
    return Path(override).expanduser() if override else None


def demo_exports_dir() -> Path:
    """Where a demo's exports go (the Audit and Experiments panes'): ``exports`` in
    ``$GPUCONSOLE_DEMO_DIR`` when set, else ``gpuconsole-demo-exports`` beside the state directory
    (``~/.local/state/gpuconsole-demo-exports`` on Linux). It outlives the demo, whose own audit
    log is in a temporary folder, and it is not the real state directory, so a demo's files never
    sit among a real session's."""
    kept = demo_dir()
    return kept / "exports" if kept is not None else state_dir().with_name(f"{APP_NAME}-demo-exports")


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) readable by its owner only (0700).

    Only the directories made here are tightened: an existing one (a log folder an admin shares
    between the logins of a bastion, say) keeps its mode, whatever its name, so no login ever
    locks the others out of it.
    """
    path = Path(path).expanduser()
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue  # made by another process meanwhile: not ours to tighten
        os.chmod(directory, PRIVATE_DIR)  # mkdir's mode is masked by the umask
    return path


def private_file(path: Path) -> Path:
    """Make sure ``path`` exists and only its owner may read or write it (0600); its directory
    is created 0700 when missing.

    A symlink planted at ``path`` is refused (``O_NOFOLLOW``), and the mode is set on the open
    descriptor, so nothing the name points to afterwards is changed.
    """
    path = Path(path).expanduser()
    private_dir(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)
    return path


def write_private(path: Path, text: str, mode: int = PRIVATE_FILE) -> None:
    """Replace ``path`` with ``text`` atomically, the new file 0600 (or ``mode``) from its first byte.

    The temporary file has an unpredictable name made with ``O_EXCL|O_NOFOLLOW`` (``mkstemp``)
    and its mode is set on the descriptor: in a folder other logins can write, a symlink planted
    under a guessed name can never make gpuconsole write or chmod a file of someone else's.
    Every file gpuconsole replaces goes through here.
    """
    path = Path(path).expanduser()
    private_dir(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def is_regular_or_missing(path: Path) -> bool:
    """Whether ``path`` is free to be replaced by a file: absent, or a regular file (not a
    device, a FIFO, a socket, a directory or a symlink)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return True  # nothing there to replace (a bad folder is reported on its own)
