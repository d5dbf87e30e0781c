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
        parent.mkdir(parents=True, exist_ok=True)
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
