"""The configuration file: where it is, reading it as TOML, and its one-line errors.

The file is ``--config PATH``, else ``$GPUCONSOLE_CONFIG``, else ``config.toml`` in the user's
configuration directory (``~/.config/gpuconsole/config.toml`` on Linux). A missing file at the
default place means no configuration; a missing file that was named explicitly is an error.

Each table is read where it is used: ``[[budgets]]`` by :mod:`gpuconsole.core.money.budget_config`
(which gives the :class:`ConfigFile`), ``[prometheus]`` by
:mod:`gpuconsole.core.fleet.prometheus_config`, ``[aws]`` and ``[aws.roles]`` by
:mod:`gpuconsole.core.access.aws_roles`, each into its msgspec Struct through
:mod:`gpuconsole.core.config_decode`. Every problem is one :class:`ConfigError` line naming the
file and the key.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuconsole.core.paths import config_dir
from gpuconsole.model import Budget

CONFIG_ENV = "GPUCONSOLE_CONFIG"
CONFIG_NAME = "config.toml"


class ConfigError(ValueError):
    """The configuration file cannot be used; the message is one line naming the file and key."""


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """What the configuration file declares (``path`` None: no file was found)."""

    path: Path | None
    budgets: tuple[Budget, ...] = ()
    rates: tuple[tuple[str, float], ...] = ()  # [money] rates: one unit of each currency in US dollars


def config_path(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> tuple[Path, bool]:
    """The configuration file to read, and whether the user named it (then it must exist)."""
    if explicit is not None:
        return Path(explicit).expanduser(), True
    override = env.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser(), True
    return config_dir() / CONFIG_NAME, False


def read_config_text(explicit: Path | str | None = None,
                     env: Mapping[str, str] = os.environ) -> tuple[Path, str | None]:
    """The configuration file's path and text; the text is None when there is no file at the
    default place.

    Raises:
        ConfigError: a named file is missing, or the file is unreadable or not UTF-8 (one line).
    """
    path, named = config_path(explicit, env)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"{path}: no such configuration file") from None
        return path, None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        return path, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """The configuration text's tables. Raises :class:`ConfigError` when it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
