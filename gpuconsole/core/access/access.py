"""Who may do what: roles, the users table, and the permission check of every action.

The identity is the OS user running the console (the bastion login, from the effective uid),
mapped to a role and its namespaces by the users table (``users.json``, 0600). The matrix:

==========  ================================================  ===================================
role        may                                               limits
==========  ================================================  ===================================
admin       every action: instances, budgets, users, jobs     MFA before each destructive action
developer   submit, delete, suspend, resume, trigger jobs;    only in its namespaces; a process
            kill its own GPU processes                        only when its own or in them
auditor     nothing that changes anything (reads the audit)   —
==========  ================================================  ===================================

Before ``gpuconsole users init`` there is no table: the OS user acts as admin without MFA, and
every action is still audited. Once a table exists, a user it does not list may change nothing.
The rules are by :class:`~gpuconsole.core.ops.actions.ActionKind` and fall back to admin-only for a
kind they do not name, so an action added later is guarded before anyone writes its rule.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gpuconsole.core.ops.actions import ActionKind, ActionRequest
from gpuconsole.core.paths import write_private
from gpuconsole.model import Principal, Role, User

DEFAULT_MFA_WINDOW_S = 120.0
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$")
NAMESPACE_RE = re.compile(r"^(\*|[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)$")


class AccessError(Exception):
    """A users-table change or read that cannot be done; the message is one line."""


# Job and service changes a developer may make in its own namespaces.
JOB_KINDS = frozenset({ActionKind.SUBMIT_JOB, ActionKind.DELETE_JOB, ActionKind.SUSPEND_JOB,
                       ActionKind.RESUME_JOB, ActionKind.TRIGGER_CRONJOB, ActionKind.SUSPEND_CRONJOB,
                       ActionKind.SCALE_SERVICE, ActionKind.RESTART_SERVICE, ActionKind.MOVE_QUEUE,
                       ActionKind.DEACTIVATE_WORKLOAD, ActionKind.REACTIVATE_WORKLOAD})
# What changes nothing in the fleet: anyone's console may send a budget's notification.
HARMLESS_KINDS = frozenset({ActionKind.NOTIFY})
# Rotating the IAM keys of one's own AWS profile: any login that may change something may.
OWN_KEY_KINDS = frozenset({ActionKind.KEY_CREATE, ActionKind.KEY_DEACTIVATE, ActionKind.KEY_DELETE})
# Admin actions that need a fresh MFA code besides the destructive ones (budgets and users).
MFA_EXTRA_VALUES = frozenset({"budget-remove", "user-add", "user-set-role", "user-remove"})


def is_process_kill(kind: ActionKind) -> bool:
    """A kill of a GPU process (whatever the kind is called: ``kill-process``, ``kill``…)."""
    return kind.value.startswith("kill")


def needs_mfa_kind(kind: ActionKind) -> bool:
    """Whether an admin must give a fresh MFA code before ``kind``."""
    return kind.destructive or kind.value in MFA_EXTRA_VALUES or is_process_kill(kind)


def needs_mfa(kind: ActionKind, params: tuple[tuple[str, str], ...] = ()) -> bool:
    """Whether an admin must give a fresh MFA code before ``kind`` with ``params``.

    Besides the kinds of :func:`needs_mfa_kind`: adding an automatic budget, or replacing one
    (even with a harmless budget). An automatic budget's stops and terminates later run with
    nobody asked, so arming or disarming one is as destructive as running them. Scaling a
    service to no replicas takes it down, as a stop does.
    """
    if needs_mfa_kind(kind):
        return True
    named = dict(params)
    if kind is ActionKind.SCALE_SERVICE and named.get("replicas") == "0":
        return True
    return kind is ActionKind.BUDGET_ADD and "yes" in (named.get("automatic"), named.get("replaces-automatic"))


def target_namespace(request: ActionRequest) -> str | None:
    """The namespace a request acts in: its ``namespace`` param, else ``ns/name`` targets' first part."""
    params = dict(request.params)
    if params.get("namespace"):
        return params["namespace"]
    if "/" in request.target and not request.target.startswith("budget "):
        return request.target.split("/", 1)[0]
    return None


@dataclass
class UsersFile:
    """The parsed users table."""

    users: dict[str, User] = field(default_factory=dict)
    mfa_window_s: float = DEFAULT_MFA_WINDOW_S


def denial(principal: Principal, request: ActionRequest, *, read_only: bool = False) -> str | None:
    """Why ``principal`` may not run ``request`` (one line), or None when it may."""
    kind = request.kind
    role = principal.role
    if kind in HARMLESS_KINDS:
        # A notification's hooks run a command and post a webhook: banners only for those who act on nothing.
        if read_only:
            return "the console runs read-only (--read-only): notifications are shown, their hooks do not run"
        if role is Role.AUDITOR:
            return f"{principal.name} is an auditor: notifications are shown, their hooks do not run"
        return None
    if read_only:
        return "the console runs read-only (--read-only): nothing can be changed"
    if role is None:
        return f"user {principal.name} is not in the users table: ask an admin to add you"
    if role is Role.ADMIN:
        return None
    if role is Role.AUDITOR:
        return f"{principal.name} is an auditor: auditors may change nothing"
    if kind in OWN_KEY_KINDS:
        return None
    namespace = target_namespace(request)
    user = principal.user
    assert user is not None
    if is_process_kill(kind):
        owner = dict(request.params).get("user", "")
        if owner and owner == principal.name:
            return None
        if user.in_namespace(namespace):
            return None
        return f"developer {principal.name} may kill only its own processes or those in {_spaces(user)}"
    if kind in JOB_KINDS:
        if namespace is None:
            return f"developer {principal.name} may not {kind.value} {request.target}: its namespace is unknown"
        if not user.in_namespace(namespace):
            return f"developer {principal.name} may act only in {_spaces(user)}, not in namespace {namespace}"
        return None
    return f"only an admin may {kind.value}; {principal.name} is a developer"


def _spaces(user: User) -> str:
    if not user.namespaces:
        return "no namespace (none assigned)"
    return "namespace(s) " + ", ".join(user.namespaces)


LOGIN_ENV = "GPUCONSOLE_LOGIN"


def current_user() -> str:
    """The OS user running the console (the bastion login), from the effective uid.

    ``LOGNAME`` and ``USER`` are never read: any login can set them. Root alone may act under
    another name with ``$GPUCONSOLE_LOGIN`` (as ``sudo -u`` would let it anyway), which the
    tests use to play each role.
    """
    euid = os.geteuid()
    named = os.environ.get(LOGIN_ENV)
    if euid == 0 and named:
        return named
    return login_name(euid)


def login_name(uid: int) -> str:
    """The passwd name of ``uid``, or the number itself when it has none (a bare container)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def login_key(name: str) -> str:
    """The key of ``name``'s per-login state (MFA): ``uid:N`` for a passwd login, so a name
    cannot borrow another login's state, else the name (a login known by name only)."""
    try:
        return f"uid:{pwd.getpwnam(name).pw_uid}"
    except KeyError:
        return name


class UsersTable:
    """The users table file: who has which role and namespaces. Writes are 0600 and atomic.

    Args:
        path: the ``users.json`` file; it need not exist (no table yet).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._cache: tuple[float, UsersFile] | None = None

    @property
    def exists(self) -> bool:
        """Whether there is a table; one this login may not even look at counts (it then grants
        nothing), so hiding the site's table never turns a login into the no-table admin."""
        try:
            self.path.stat()
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return True

    def load(self) -> UsersFile:
        """The table as the file says now (re-read when the file changed)."""
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return UsersFile()
        except OSError as exc:
            raise AccessError(f"cannot read the users table {self.path}: {exc.strerror or exc}") from exc
        with self._lock:
            if self._cache is not None and self._cache[0] == stamp:
                return self._cache[1]
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            users = {
                name: User(name, Role(entry["role"]), tuple(entry.get("namespaces", ())))
                for name, entry in dict(data.get("users", {})).items()
            }
            table = UsersFile(users, float(data.get("mfa_window_s", DEFAULT_MFA_WINDOW_S)))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AccessError(f"cannot read the users table {self.path}: {exc}") from exc
        with self._lock:
            self._cache = (stamp, table)
        return table

    def principal(self, name: str) -> Principal:
        """Who ``name`` is: admin without MFA while there is no table."""
        if not self.exists:
            return Principal(name, Role.ADMIN, ("*",), managed=False)
        try:
            user = self.load().users.get(name)
        except AccessError:
            return Principal(name, None)  # a broken table grants nothing
        if user is None:
            return Principal(name, None)
        return Principal(name, user.role, user.namespaces)

    def mfa_window_s(self) -> float:
        try:
            return self.load().mfa_window_s
        except AccessError:
            return DEFAULT_MFA_WINDOW_S

    # ------------------------------------------------------------------ changes (checked by the caller)
    def init(self, admin: str) -> User:
        if self.exists:
            raise AccessError(f"a users table exists already at {self.path}: use users add / set-role")
        user = User(check_name(admin), Role.ADMIN)
        self._save(UsersFile({user.name: user}))
        return user

    def add(self, name: str, role: Role, namespaces: tuple[str, ...] = ()) -> User:
        table = self._require()
        if name in table.users:
            raise AccessError(f"user {name} exists already: use users set-role")
        user = User(check_name(name), role, check_namespaces(namespaces))
        table.users[user.name] = user
        self._save(table)
        return user

    def set_role(self, name: str, role: Role, namespaces: tuple[str, ...] | None = None) -> User:
        table = self._require()
        old = table.users.get(name)
        if old is None:
            raise AccessError(f"no user {name} in the users table")
        user = User(name, role, check_namespaces(namespaces) if namespaces is not None else old.namespaces)
        table.users[name] = user
        self._last_admin_check(table, name, user)
        self._save(table)
        return user

    def remove(self, name: str) -> User:
        table = self._require()
        user = table.users.pop(name, None)
        if user is None:
            raise AccessError(f"no user {name} in the users table")
        self._last_admin_check(table, name, None)
        self._save(table)
        return user

    def list(self) -> tuple[User, ...]:
        return tuple(sorted(self.load().users.values(), key=lambda u: u.name))

    def _require(self) -> UsersFile:
        if not self.exists:
            raise AccessError("no users table yet: run gpuconsole users init first")
        table = self.load()
        return UsersFile(dict(table.users), table.mfa_window_s)

    @staticmethod
    def _last_admin_check(table: UsersFile, name: str, user: User | None) -> None:
        if not any(u.role is Role.ADMIN for u in table.users.values()):
            raise AccessError(f"{name} is the last admin: add another admin first")

    def _save(self, table: UsersFile) -> None:
        data = {
            "mfa_window_s": table.mfa_window_s,
            "users": {u.name: {"role": u.role.value, "namespaces": list(u.namespaces)}
                      for u in sorted(table.users.values(), key=lambda u: u.name)},
        }
        # A table an admin made readable to every login of a bastion (0644) keeps its mode.
        mode = self.path.stat().st_mode & 0o777 if self.path.exists() else 0o600
        write_private(self.path, json.dumps(data, indent=2) + "\n", mode & 0o644 | 0o600)


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise AccessError(f"invalid user name {name!r}: letters, digits and . _ - @ only")
    return name


def check_namespaces(namespaces: tuple[str, ...]) -> tuple[str, ...]:
    for ns in namespaces:
        if not NAMESPACE_RE.match(ns):
            raise AccessError(f"invalid namespace {ns!r}: a Kubernetes namespace name or *")
    return tuple(dict.fromkeys(namespaces))
