"""Site settings win: a bastion's ``/etc/gpuconsole`` binds every login that is not root.

When the site folder holds a users table (``users.json``), or a config file (``config.toml``)
with an ``[access]`` or ``[audit]`` table, the files the guard uses come from there. A login
that names others (``GPUCONSOLE_USERS``, ``GPUCONSOLE_MFA``, ``GPUCONSOLE_AUDIT_DB``, or a config
file of its own, by ``--config``, ``GPUCONSOLE_CONFIG`` or its default place, declaring those
tables) is refused in one line, and the attempt is audited in the site's log. Root, or the
owner of the site file concerned, may still point elsewhere: for tests, and on a machine with
one login.

These are courtesy checks inside the login's own process: they stop the easy bypass and say
why. What holds against a determined login is IAM, RBAC and the remote audit sink (README,
"Security model").

Keys read here: ``[access] users`` (the users table, default ``users.json`` beside the config)
and ``[audit] db`` (the audit log, default the login's own).
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuconsole.core import paths
from gpuconsole.core.access.access import AccessError
from gpuconsole.core.config import ConfigError, config_path, parse_toml

SECTIONS = ("access", "audit")


class SiteSettingsRefused(AccessError):
    """A login tried to replace the site's settings; the message is one line."""


@dataclass(frozen=True, slots=True)
class SiteSettings:
    """What the site folder declares.

    Attributes:
        folder: the site folder.
        users: its users table, when it has one (also when this login may not read it).
        config: its config file, when it declares ``[access]`` or ``[audit]``.
        tables: those tables (an unreadable config counts as declaring both, empty).
    """

    folder: Path
    users: Path | None = None
    config: Path | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        """Whether this is a shared machine: the site declares users or a config of its own."""
        return self.users is not None or self.config is not None

    def audit_db(self, euid: int | None = None) -> Path | None:
        """The audit log the site names for this login (``[audit] db``), or None for each
        login's own. The path must be a login's own: it starts with ``~`` (that login's home,
        from the password database, not ``$HOME``) or holds ``{login}`` (its name).

        Raises:
            SiteSettingsRefused: one path for every login (the first one to write it would
                lock out every other), in one line naming the key.
        """
        value = self.tables.get("audit", {}).get("db")
        if not value:
            return None
        text = str(value)
        if not (text.startswith("~/") or "{login}" in text):
            raise SiteSettingsRefused(
                f"[audit] db = {text!r} in {self.config}: one audit log for every login locks out all but the "
                "first to write it; name a per-login path (starting with ~/ or holding {login})")
        entry = pwd.getpwuid(os.geteuid() if euid is None else euid)
        text = text.replace("{login}", entry.pw_name)
        path = Path(entry.pw_dir) / text[2:] if text.startswith("~/") else Path(text)
        folder = _others_may_write(path, entry.pw_uid)
        if folder is not None:
            raise SiteSettingsRefused(
                f"[audit] db = {value!r} in {self.config}: another login may write {folder}, so it could plant "
                f"{entry.pw_name}'s log there first; name a path in the login's own home (~/…) or in a folder "
                "only that login may write")
        return path


    def check_audit_copy(self) -> None:
        """Refuse a site copy that each login would write with keys of its own choosing.

        Raises:
            SiteSettingsRefused: the site's ``[audit]`` names a CloudWatch copy but neither a
                relay (root's keys send it) nor an account (each login's own IAM user sends it,
                :mod:`.audit_writer`), in one line naming the key.
        """
        table = self.tables.get("audit", {})
        if table.get("cloudwatch_log_group") and not table.get("relay") and not table.get("account"):
            raise SiteSettingsRefused(
                f"[audit] cloudwatch_log_group in {self.config} names neither relay nor account: each login would "
                "send the copy with whatever keys its own files hold (another account's, or keys that may delete "
                "it); name the relay ([audit] relay) or the account whose IAM users write it ([audit] account)")


@dataclass(frozen=True, slots=True)
class AccessFiles:
    """The files a guard works on."""

    users: Path
    mfa: Path
    audit: Path


def load_site(folder: Path | None = None) -> SiteSettings:
    """The settings of ``folder`` (default :func:`gpuconsole.core.paths.site_dir`)."""
    folder = folder or paths.site_dir()
    users = folder / paths.SITE_USERS_NAME
    config = folder / paths.SITE_CONFIG_NAME
    site_users = users if _present(users) else None
    if not _present(config):
        return SiteSettings(folder, site_users)
    try:
        tables = {name: dict(table) for name, table in _tables(config).items() if name in SECTIONS}
    except (OSError, ConfigError):
        tables = {name: {} for name in SECTIONS}  # unreadable here: it binds all the same
    access = tables.get("access", {})
    if access.get("users"):
        site_users = Path(str(access["users"])).expanduser()
    return SiteSettings(folder, site_users, config if tables else None, tables)


def site_rules_file(site: SiteSettings | None = None) -> Path | None:
    """On a shared machine, the site's config file (where rules that act by themselves come
    from: :func:`gpuconsole.core.ops.autopilot.loading.console_rules`); else None."""
    site = site or load_site()
    if not site.shared:
        return None
    return site.folder / paths.SITE_CONFIG_NAME


def own_file_plans_only(config: Path, site: SiteSettings | None = None) -> bool:
    """Whether what acts by itself in ``config`` (automatic budgets, rules) may only plan: on a
    shared machine, every config file but the site's own (nobody reviewed it, and it would act
    as the automation identity)."""
    site_file = site_rules_file(site)
    if site_file is None:
        return False
    try:
        return Path(config).resolve() != site_file.resolve()
    except OSError:
        return True


def resolve(explicit_config: Path | str | None = None, env: Mapping[str, str] = os.environ,
            euid: int | None = None, site: SiteSettings | None = None) -> tuple[AccessFiles, list[str]]:
    """The users table, MFA secrets and audit log this login works on, and the overrides it
    tried and may not make (one line each; empty when none).

    The files returned are the site's wherever an override was refused, so the refusal itself
    is audited where the site wants it.
    """
    site = site or load_site()
    euid = os.geteuid() if euid is None else euid
    refused: list[str] = []

    def choose(variable: str, own: Path, site_path: Path | None, rule: Path | None) -> Path:
        wanted = env.get(variable)
        if site_path is None or rule is None:
            return Path(wanted).expanduser() if wanted else own
        if wanted and Path(wanted).expanduser() != site_path:
            if _may_override(rule, euid):
                return Path(wanted).expanduser()
            refused.append(f"{variable} may not replace the site's setting ({rule}): only root or the file's owner "
                           "may point elsewhere")
        return site_path

    users = choose(paths.USERS_ENV, paths.config_dir() / "users.json", site.users, site.users)
    access_rule = site.config if "access" in site.tables else None
    mfa = choose(paths.MFA_ENV, paths.default_mfa_path(), paths.default_mfa_path() if access_rule else None, access_rule)
    audit_rule = site.config if "audit" in site.tables else None
    site.check_audit_copy()
    own_audit = paths.state_dir() / "audit.db"
    audit = choose(paths.AUDIT_ENV, own_audit, (site.audit_db(euid) or own_audit) if audit_rule else None, audit_rule)
    refused.extend(_config_overrides(site, explicit_config, env, euid))
    return AccessFiles(users, mfa, audit), refused


def _config_overrides(site: SiteSettings, explicit: Path | str | None, env: Mapping[str, str], euid: int) -> list[str]:
    """The site's ``[access]``/``[audit]`` tables that the login's own config file declares again."""
    if site.config is None:
        return []
    mine, _named = config_path(explicit, env)
    try:
        if mine.resolve() == site.config.resolve() or not mine.is_file():
            return []
        declared = [name for name in _tables(mine) if name in site.tables]
    except (OSError, ConfigError):
        return []  # the config loader reports a broken file itself
    if not declared or _may_override(site.config, euid):
        return []
    tables = ", ".join(f"[{name}]" for name in declared)
    return [f"{mine} declares {tables}, which the site's {site.config} sets: only root or its owner may replace them"]


def site_table(name: str, folder: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The site config's ``[name]`` table and the file's path, or None when it has none.

    Raises:
        ConfigError: the site's config cannot be read or parsed (it binds all the same).
    """
    config = (folder or paths.site_dir()) / paths.SITE_CONFIG_NAME
    if not _present(config):
        return None
    try:
        table = _tables(config).get(name)
    except OSError as exc:
        raise ConfigError(f"{config}: cannot read it: {exc.strerror or exc}") from None
    return None if table is None else (config, table)


def _tables(path: Path) -> dict[str, Any]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    return {k: v for k, v in parse_toml(text, path).items() if isinstance(v, dict)}


def _present(path: Path) -> bool:
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False
    except OSError:
        return True  # hidden from this login: it binds all the same


def _others_may_write(path: Path, uid: int) -> Path | None:
    """The folder that will hold ``path`` (the nearest one that exists), when a login other
    than ``uid`` (and root) may create files in it: a world- or group-writable folder (``/tmp``,
    sticky or not), or one another login owns."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        found = folder.stat()
    except OSError:
        return None  # cannot look: opening the log says why
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or found.st_uid not in (uid, 0):
        return folder
    return None


def _may_override(rule: Path, euid: int) -> bool:
    """Root, or the owner of the site file that sets the rule."""
    if euid == 0:
        return True
    try:
        return os.stat(rule).st_uid == euid
    except OSError:
        return False
