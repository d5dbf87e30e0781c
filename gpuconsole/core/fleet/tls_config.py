"""The ``[tls]`` table of the configuration file: the lowest TLS version gpuconsole accepts.

```toml
[tls]
min_version = "1.2"   # default "1.3"; "1.2" for an old proxy in front of Prometheus or the API server
```

It applies to the connections gpuconsole opens itself (Prometheus, the Kubernetes API, budget
webhooks; :mod:`gpuconsole.backends.tls`), for the whole process. AWS calls keep botocore's own
floor (TLS 1.2). A value that is not a version gpuconsole knows is one line naming the key, and the
floor stays at TLS 1.3: a typo never weakens it. On a shared machine the site config's ``[tls]``
(``/etc/gpuconsole/config.toml``) binds every login: a login's own file cannot lower it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

from gpuconsole.backends import tls
from gpuconsole.core.access.site import site_table
from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table


class TlsTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[tls]`` table as written (the versions are those of :data:`gpuconsole.backends.tls.VERSIONS`)."""

    min_version: Literal["1.2", "1.3"] = "1.3"


def read_min_version(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> str:
    """``[tls] min_version``: the site config's when it has a ``[tls]`` table, else the
    configuration file's (``"1.3"`` when unset or no file).

    Raises:
        ConfigError: the file cannot be read, or the value is not ``"1.2"`` or ``"1.3"`` (one line).
    """
    declared = site_table("tls")
    if declared is not None:
        path, table = declared
    else:
        path, text = read_config_text(explicit, env)
        if text is None:
            return tls.DEFAULT_MINIMUM
        table = parse_toml(text, path).get("tls", {})
    try:
        value = decode_table(table, TlsTable).min_version
    except TableError as exc:
        if not exc.key:
            raise ConfigError(f"{path}: [tls] must be a table") from None
        if exc.key == "min_version":
            exc = TableError(exc.key, f"{table['min_version']!r} is not \"1.2\" or \"1.3\"")
        raise ConfigError(f"{path}: key {exc.key} of [tls]: {exc.problem}") from None
    return value


def apply_tls_config(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> str | None:
    """Set the process's TLS floor from the configuration file; the one-line problem, or None.

    On a problem the floor is TLS 1.3, the strict default.
    """
    try:
        version = read_min_version(explicit, env)
    except ConfigError as exc:
        tls.set_minimum_version(tls.DEFAULT_MINIMUM)
        return str(exc)
    tls.set_minimum_version(version)
    return None
