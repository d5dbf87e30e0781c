"""Where the fleet's Prometheus is: the ``--prometheus`` flags over the config file's table.

The configuration file (see :mod:`gpuconsole.core.config`) may hold one ``[prometheus]`` table::

    [prometheus]
    url = "https://prometheus.example.com"   # required; a path prefix is kept
    token_file = "/var/run/secrets/prometheus/token"   # bearer token, re-read on every poll
    # username = "gpuconsole"                # basic auth instead of a token; the password from
    # password_file = "~/.config/gpuconsole/prometheus-password"   # or $GPUCONSOLE_PROMETHEUS_PASSWORD
    ca_file = "/etc/ssl/internal-ca.pem"     # verify the server with this CA bundle
    timeout = 5                              # seconds to connect, and to wait for each answer
    selector = 'cluster="prod"'              # label matchers added to every query
    compress = true                          # gzip answers: for a distant Prometheus over a slow link

A flag given on the command line wins over the same key of the file; ``--prometheus`` with a
URL replaces the file's whole table (so a token meant for one server never goes to another).
The token may also come from ``$GPUCONSOLE_PROMETHEUS_TOKEN``. Nothing is read from the network
to decide: with ``--gpus auto`` the GPU source is Prometheus exactly when a URL is configured.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from gpuconsole.backends.registry import prometheus_settings
from gpuconsole.core.config import ConfigError, config_path
from gpuconsole.core.config_decode import TableError, decode_table, fields_of

if TYPE_CHECKING:
    from gpuconsole.backends.registry import PrometheusSettings

TABLE = "prometheus"
_Text = Annotated[str, msgspec.Meta(min_length=1)]


class PrometheusTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[prometheus]`` table as written (a key left out is None)."""

    url: Annotated[str, msgspec.Meta(min_length=1, extra={"missing": "the table needs the server's URL"})]
    token_file: _Text | None = None
    username: _Text | None = None
    password_file: _Text | None = None
    ca_file: _Text | None = None
    timeout: Annotated[float, msgspec.Meta(description="a number of seconds")] | None = None
    selector: _Text | None = None
    compress: bool | None = None


KEYS = fields_of(PrometheusTable)
# What the command line calls a key, after --prometheus-, where it is not the key itself.
_FLAGS = {"token_file": "token-file", "username": "user", "password_file": "password-file", "ca_file": "ca",
          "compress": "gzip"}


def from_config(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The ``[prometheus]`` table of the configuration file (``{}`` when there is none).

    A file that is missing at the default place, or is not TOML, gives ``{}`` here: the budgets'
    reading of the same file reports those problems. A bad key of the table raises.

    Raises:
        ConfigError: a key that is unknown or of the wrong type (one line naming file and key).
    """
    path, _named = config_path(explicit, env)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    table = data.get(TABLE)
    if table is None:
        return {}
    try:
        decoded = decode_table(table, PrometheusTable)
    except TableError as exc:
        if not exc.key:
            raise ConfigError(f"{path}: key {TABLE}: write it as a [prometheus] table") from None
        raise ConfigError(f"{path}: [prometheus] key {exc.key}: {exc.problem}") from None
    given = {k: v for k, v in msgspec.structs.asdict(decoded).items() if v is not None}
    return {**given, "_path": str(path)}


def resolve(flags: Mapping[str, Any], explicit_config: Path | str | None = None,
            env: Mapping[str, str] = os.environ) -> PrometheusSettings | None:
    """The settings to use, or None when no Prometheus is configured.

    Args:
        flags: ``url``, ``token_file``, ``username``, ``password_file``, ``ca_file``, ``timeout``,
            ``selector``, ``compress`` from the command line (None where not given).

    Raises:
        ValueError: a bad value, in one line (a :class:`ConfigError` names the file and key).
    """
    given = {k: v for k, v in flags.items() if v is not None and k in KEYS}
    table = {} if given.get("url") else from_config(explicit_config, env)
    where = f"{table.pop('_path')}: [prometheus]: " if table else ""
    merged = {**table, **given}
    if not merged.get("url"):
        if given:
            raise ValueError(f"--prometheus-{_FLAGS.get(next(iter(given)), next(iter(given)))} needs --prometheus URL")
        return None
    return from_table(merged, where, env)


def from_table(merged: Mapping[str, Any], where: str = "", env: Mapping[str, str] = os.environ) -> PrometheusSettings:
    """The settings a table of the ``[prometheus]`` keys gives (``url`` set), checked.

    Raises:
        ValueError: a bad value, in one line starting with ``where``.
    """
    settings = prometheus_settings(
        url=str(merged["url"]),
        token_file=_path(merged.get("token_file")),
        username=merged.get("username"),
        password_file=_path(merged.get("password_file")),
        ca_file=_path(merged.get("ca_file")),
        timeout=float(merged.get("timeout", 5.0)),
        selector=str(merged.get("selector", "")),
        compress=bool(merged.get("compress", False)),
    )
    try:
        return settings.check(env)
    except ValueError as exc:
        raise ValueError(f"{where}{exc}") from None


def _path(value: Any) -> str | None:
    return str(Path(value).expanduser()) if value else None


def serving_figures(config: Any, fleet: PrometheusSettings | None, env: Mapping[str, str] = os.environ) -> Any:
    """Where the inference services' figures are read (``backends.served.FiguresSettings``):
    ``[services.prometheus]`` when the ``[services]`` table (``config``, a ``ServingConfig``) names
    one, else the fleet's Prometheus; None without either.

    Raises:
        ConfigError: a bad ``[services.prometheus]`` key, in one line naming the file and key.
    """
    from gpuconsole.backends.registry import serving_figures_settings

    prometheus = fleet
    if config.prometheus:
        where = f"{config.path}: [services.prometheus]" if config.path else "[services.prometheus]"
        try:
            decoded = decode_table(dict(config.prometheus), PrometheusTable)
        except TableError as exc:
            raise ConfigError(f"{where} key {exc.key or 'url'}: {exc.problem}") from None
        try:
            prometheus = from_table({k: v for k, v in msgspec.structs.asdict(decoded).items() if v is not None},
                                    f"{where}: ", env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if prometheus is None:
        return None
    return serving_figures_settings(prometheus, config.window_s, config.custom, config.slo_windows(),
                                    config.slo_window_services())
