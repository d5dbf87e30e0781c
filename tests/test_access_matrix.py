"""Every action × every role through the core doors: allowed, denied, and denied outside the
developer's namespace, each with its audit record."""

from __future__ import annotations

import pytest

from gpuconsole.core.access.access import Role
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.ops.actions import ActionDenied, ActionError, ActionKind
from tests.access_world import (
    CASES,
    FLEET_KINDS,
    NAMES,
    door,
    expected_allowed,
    guard_for,
    make_home,
    open_mfa,
    target_of,
)
from tests.helpers import FrozenClock

NOW = 1_800_000_000.0


def now() -> float:
    return NOW


def console_as(tmp_path, role: Role, *, read_only: bool = False):
    users, mfa, audit, secret = make_home(tmp_path, now)
    guard = guard_for(role, users, mfa, audit, read_only=read_only)
    clock = FrozenClock()
    options = ConsoleOptions(sources=SourceOptions(demo=True, seed=7, sim_start=clock()), clock=clock, guard=guard)
    return Console(options), guard, secret


@pytest.mark.parametrize("role,scope", CASES, ids=[f"{r.value}-{s}" for r, s in CASES])
@pytest.mark.parametrize("kind", FLEET_KINDS, ids=[k.value for k in FLEET_KINDS])
def test_every_action_for_every_role_through_the_core(tmp_path, kind, role, scope) -> None:
    console, guard, secret = console_as(tmp_path, role)
    try:
        if role is Role.ADMIN:
            open_mfa(guard, secret, NOW)
        before = len(guard.audit.records())
        allowed = expected_allowed(kind, role, scope)
        try:
            door(console, kind, scope)()
        except ActionDenied as exc:
            assert not allowed, f"{kind.value} by {role.value} was denied: {exc}"
            assert str(exc).startswith("denied: ")
        except ActionError:
            assert allowed  # a backend refusal (a state, a missing store) is not a denial
        else:
            assert allowed, f"{kind.value} by {role.value} ({scope}) ran"
        records = [r for r in guard.audit.records()[before:] if r.action == kind.value]
        assert records, f"no audit record for {kind.value}"
        last = records[-1]
        assert (last.actor, last.role, last.action) == (NAMES[role], role.value, kind.value)
        assert last.target == target_of(kind, scope)
        if allowed:
            assert not last.result.startswith("denied"), last.result
        else:
            assert last.result.startswith("denied: "), last.result
        assert guard.audit.verify().ok
    finally:
        console.close()


def test_a_developer_is_told_why_in_one_line(tmp_path) -> None:
    console, _guard, _ = console_as(tmp_path, Role.DEVELOPER)
    try:
        with pytest.raises(ActionDenied, match=r"^denied: developer dev may act only in namespace\(s\) team-nlp, chat, not in namespace research$"):
            console.services.jobs.trigger("research", "weekly-benchmark")
        with pytest.raises(ActionDenied, match=r"^denied: only an admin may terminate; dev is a developer$"):
            door(console, ActionKind.TERMINATE, "own")()
    finally:
        console.close()


def test_an_admin_without_a_fresh_code_is_denied_and_recorded(tmp_path) -> None:
    console, guard, _ = console_as(tmp_path, Role.ADMIN)
    try:
        with pytest.raises(ActionDenied, match="needs a current MFA code"):
            door(console, ActionKind.STOP, "own")()
        # Not destructive: no code needed.
        door(console, ActionKind.START, "own")()
        results = [(r.action, r.result.split(":")[0]) for r in guard.audit.records()]
        assert ("stop", "denied") in results and ("start", "ok") in results
    finally:
        console.close()


def test_read_only_denies_every_change_to_everyone(tmp_path) -> None:
    console, guard, secret = console_as(tmp_path, Role.ADMIN, read_only=True)
    try:
        open_mfa(guard, secret, NOW)
        for kind in (ActionKind.START, ActionKind.SUBMIT_JOB, ActionKind.BUDGET_ADD, ActionKind.USER_ADD):
            with pytest.raises(ActionDenied, match="read-only"):
                door(console, kind, "own")()
        assert all(r.result.startswith("denied: the console runs read-only")
                   for r in guard.audit.records() if r.action != "mfa-verify")
    finally:
        console.close()


def test_without_a_users_table_the_os_user_acts_as_admin_without_mfa_and_is_audited(tmp_path) -> None:
    from gpuconsole.core.access.guard import default_guard

    guard = default_guard(user="someone")
    clock = FrozenClock()
    options = ConsoleOptions(sources=SourceOptions(demo=True, seed=7, sim_start=clock()), clock=clock, guard=guard)
    console = Console(options)
    try:
        door(console, ActionKind.STOP, "own")()
        last = guard.audit.records()[-1]
        assert (last.actor, last.role, last.action, last.result) == ("someone", "admin (no users table)", "stop", "ok")
    finally:
        console.close()


def test_a_user_missing_from_the_table_may_change_nothing(tmp_path) -> None:
    users, mfa, audit, _ = make_home(tmp_path, now)
    from gpuconsole.core.access.guard import Guard

    guard = Guard(users, mfa, audit, user="mallory")
    assert guard.why_not(ActionKind.SUBMIT_JOB, "team-nlp/x") == "user mallory is not in the users table: ask an admin to add you"
    assert guard.why_not(ActionKind.NOTIFY) is None


def test_process_kills_follow_the_developer_rule(tmp_path) -> None:
    """A kill kind added later: its own processes or its namespaces for a developer, MFA for an admin."""
    from gpuconsole.core.access.access import Principal, denial, needs_mfa_kind
    from gpuconsole.core.ops.actions import ActionRequest

    kill = type("Kind", (), {"value": "kill-process", "destructive": True})()
    dev = Principal("dev", Role.DEVELOPER, ("team-nlp",))
    own = ActionRequest(ActionKind.STOP, "pid 42", params=())
    object.__setattr__(own, "kind", kill)
    assert denial(dev, own) is not None
    object.__setattr__(own, "params", (("user", "dev"),))
    assert denial(dev, own) is None
    object.__setattr__(own, "params", (("namespace", "team-nlp"),))
    assert denial(dev, own) is None
    assert needs_mfa_kind(kill)
    assert denial(Principal("aud", Role.AUDITOR), own) is not None


def test_a_users_table_made_readable_for_a_bastion_keeps_its_mode(tmp_path) -> None:
    import stat

    from gpuconsole.core.access.access import UsersTable

    table = UsersTable(tmp_path / "etc" / "users.json")
    table.init("root")
    assert stat.S_IMODE(table.path.stat().st_mode) == 0o600
    table.path.chmod(0o644)
    table.add("dev", Role.DEVELOPER, ("team-nlp",))
    assert stat.S_IMODE(table.path.stat().st_mode) == 0o644
    assert table.principal("dev").namespaces == ("team-nlp",)
