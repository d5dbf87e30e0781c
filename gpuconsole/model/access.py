"""Who acts and what was recorded: gpuconsole roles, users of the users table, the acting
principal, and audit records with the filter that lists them.
"""

from __future__ import annotations

import enum
import json
from datetime import datetime

import msgspec

from gpuconsole.model.value import Value


class Role(str, enum.Enum):
    ADMIN = "admin"
    DEVELOPER = "developer"
    AUDITOR = "auditor"


class User(Value):
    name: str
    role: Role
    namespaces: tuple[str, ...] = ()

    def in_namespace(self, namespace: str | None) -> bool:
        return namespace is not None and ("*" in self.namespaces or namespace in self.namespaces)


class Principal(Value):
    """The one acting: its name, its role (None when the table does not list it), and whether
    the role comes from a users table (False: a fresh install, acting as admin without MFA)."""

    name: str
    role: Role | None
    namespaces: tuple[str, ...] = ()
    managed: bool = True

    @property
    def role_text(self) -> str:
        return self.role.value if self.role is not None else "none"

    @property
    def user(self) -> User | None:
        return User(self.name, self.role, self.namespaces) if self.role is not None else None


class AuditRecord(Value):
    seq: int
    ts: str  # ISO 8601, UTC
    actor: str
    role: str
    action: str
    target: str
    params: str  # JSON object, secrets redacted
    result: str  # "ok", "denied: …" or "failed: …"
    prev_hash: str
    hash: str

    @property
    def at(self) -> float:
        return datetime.fromisoformat(self.ts).timestamp()

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = msgspec.structs.asdict(self)
        out["params"] = json.loads(self.params)
        return out


class AuditFilter(Value):
    """What to list: substrings of actor, action and target; a time range (epoch seconds)."""

    actor: str = ""
    action: str = ""
    target: str = ""
    since: float | None = None
    until: float | None = None
    result: str = ""

    def matches(self, r: AuditRecord) -> bool:
        if self.actor and self.actor.lower() not in r.actor.lower():
            return False
        if self.action and self.action.lower() not in r.action.lower():
            return False
        if self.target and self.target.lower() not in r.target.lower():
            return False
        if self.result and not r.result.startswith(self.result):
            return False
        at = r.at
        if self.since is not None and at < self.since:
            return False
        return not (self.until is not None and at >= self.until)
