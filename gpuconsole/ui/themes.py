"""Themes shipped in the top-level ``themes/`` folder (installed as ``gpuconsole/themes``).

A theme file is TOML with the fields of :class:`textual.theme.Theme`. The short name a user types
(``--theme dark``) is the file's stem; the Textual name is ``gpuconsole-<stem>``.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.theme import Theme

DEFAULT_THEME = "dark"
PLAIN_THEME = "contrast"  # used under NO_COLOR and on terminals without colour


def theme_dir() -> Path:
    """Where the theme files are: inside the installed package, or beside it in a checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "themes", package.parent / "themes"):
        if candidate.is_dir() and any(candidate.glob("*.toml")):
            return candidate
    raise FileNotFoundError("gpuconsole themes are missing: reinstall gpuconsole")


@cache
def theme_files() -> dict[str, Path]:
    return {path.stem: path for path in sorted(theme_dir().glob("*.toml"))}


def theme_names() -> list[str]:
    return list(theme_files())


def textual_name(short: str) -> str:
    return f"gpuconsole-{short}"


def short_name(textual: str) -> str:
    return textual.removeprefix("gpuconsole-")


def theme_fields(short: str) -> dict[str, Any]:
    """The fields of one theme file (raises KeyError for an unknown theme)."""
    with theme_files()[short].open("rb") as fh:
        data = tomllib.load(fh)
    data["name"] = textual_name(short)
    return data


def load_themes() -> list[Theme]:
    from textual.theme import Theme

    return [Theme(**theme_fields(short)) for short in theme_names()]
