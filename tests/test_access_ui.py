"""Roles in the console, as a keyboard user meets them: an allowed action asks, (for an admin)
wants an MFA code, runs through the core and is audited; a denied one is disabled with its
reason on screen; the Audit pane filters, exports and analyses usage; --read-only."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import pytest
from textual.widgets import Input

from gpuconsole.core import paths
from gpuconsole.core.access.access import Role, needs_mfa_kind
from gpuconsole.core.access.mfa import code_at
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.ops.actions import ActionKind, ActionRequest
from gpuconsole.model import Budget, InstanceState
from gpuconsole.ui.panes.gpus import PID
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.mfa_prompt import MfaPrompt
from tests.access_world import (
    CASES,
    INSTANCE,
    JOBS,
    PROCESS_JOBS,
    NAMES,
    OTHER_NS,
    OWN_NS,
    expected_allowed,
    guard_for,
    make_home,
)
from tests.helpers import FrozenClock, wait_until
from tests.driving import running, table

NOW = 1_800_000_000.0


def now() -> float:
    return NOW


@asynccontextmanager
async def console_app(tmp_path, role: Role, *, read_only: bool = False):
    users, mfa, audit, secret = make_home(tmp_path, now)
    guard = guard_for(role, users, mfa, audit, read_only=read_only)
    clock = FrozenClock()
    options = ConsoleOptions(sources=SourceOptions(demo=True, seed=7, sim_start=clock()), interval=0.25, timeout=0.5,
                             clock=clock, guard=guard)
    async with running(Console(options), ready=lambda app: app.access_principal is not None) as (app, pilot):
        yield app, pilot, secret


async def select_row(app, pilot, pane_key: str, table_id: str, key: str) -> None:
    await pilot.press(pane_key)
    await pilot.pause()
    t = table(app, table_id)
    await wait_until(lambda: key in t.shown_keys)
    t.focus()
    t.move_cursor(row=t.shown_keys.index(key))
    await pilot.pause()


def access_line(app, pane_id: str) -> str:
    line = app.query_one(f"#{pane_id}-pane").query_one(".access-line")
    return str(line.content) if line.display else ""


UI_ACTIONS = {
    # kind: (pane key, pane id, table id, key pressed, action name, parameters)
    ActionKind.STOP: ("4", "instances", "instance-table", "s", "instance", ("stop",)),
    ActionKind.TERMINATE: ("4", "instances", "instance-table", "x", "instance", ("terminate",)),
    ActionKind.SUSPEND_JOB: ("3", "jobs", "job-table", "s", "suspend", ()),
    ActionKind.DELETE_JOB: ("3", "jobs", "job-table", "ctrl+d", "delete", ()),
    ActionKind.TRIGGER_CRONJOB: ("3", "jobs", "cron-table", "T", "trigger", ()),
    ActionKind.KILL_PROCESS: ("2", "gpus", "gpu-table", "T", "signal", ("SIGTERM",)),
    ActionKind.REBOOT: ("4", "instances", "instance-table", "b", "instance", ("reboot",)),
    ActionKind.SUSPEND_CRONJOB: ("3", "jobs", "cron-table", "s", "suspend", ()),
    ActionKind.BUDGET_REMOVE: ("5", "budgets", "budget-table", "x", "remove_budget", ()),
    ActionKind.BUDGET_ADD: ("5", "budgets", "budget-table", "a", "add_budget", ()),
    ActionKind.RESUME_JOB: ("3", "jobs", "job-table", "s", "suspend", ()),
    ActionKind.START: ("4", "instances", "instance-table", "S", "instance", ("start",)),
}


async def set_the_scene(app, kind: ActionKind, scope: str) -> None:
    """What an action needs to act on (a saved budget, a stopped instance, a suspended job),
    made through the core without the guard, and seen in the snapshot."""
    core = app.core
    guard, core.services.actions.guard = core.services.actions.guard, None
    try:
        if kind is ActionKind.BUDGET_REMOVE:
            core.services.budget_ops.add(Budget(name="matrix", amount=100.0))
        elif kind is ActionKind.START:
            core.services.cloud.perform(ActionRequest(ActionKind.STOP, INSTANCE, "us-east-1", "yes"))
            core.clock.advance(300)  # the simulated instance finishes stopping
        elif kind is ActionKind.RESUME_JOB:
            ns = OWN_NS if scope == "own" else OTHER_NS
            core.services.jobs.suspend("Job", ns, JOBS[ns], "yes")
        else:
            return
    finally:
        core.services.actions.guard = guard
    core.refresh()
    if kind is ActionKind.START:
        await wait_until(lambda: any(i.instance_id == INSTANCE and i.state is InstanceState.STOPPED
                                     for i in app.snapshot.instances))
    if kind is ActionKind.RESUME_JOB:
        await wait_until(lambda: any(j.name in JOBS.values() and j.state.value == "suspended" for j in app.snapshot.jobs))


def row_key(app, kind: ActionKind, scope: str) -> str:
    ns = OWN_NS if scope == "own" else OTHER_NS
    if kind in (ActionKind.STOP, ActionKind.TERMINATE, ActionKind.REBOOT, ActionKind.START):
        return INSTANCE
    if kind is ActionKind.BUDGET_ADD:
        return "sprint"  # any row: adding does not depend on it
    if kind is ActionKind.BUDGET_REMOVE:
        return "matrix"  # saved by the test (the demo's own budget cannot be removed)
    if kind is ActionKind.KILL_PROCESS:  # a process of the job's pod, a row under its GPU
        job = next(j for j in app.snapshot.jobs if j.namespace == ns and j.name == PROCESS_JOBS[ns])
        gpu, proc = next((g, p) for g in app.snapshot.gpus for p in g.processes if job.owns_pod(p.pod_uid))
        return f"{gpu.uuid}{PID}{proc.pid}"
    if kind in (ActionKind.DELETE_JOB, ActionKind.SUSPEND_JOB, ActionKind.RESUME_JOB):
        return next(j.uid for j in app.snapshot.jobs if j.namespace == ns and j.name == JOBS[ns])
    cron = {OWN_NS: "nightly-eval", OTHER_NS: "weekly-benchmark"}[ns]
    return next(c.uid for c in app.snapshot.cronjobs if c.namespace == ns and c.name == cron)


@pytest.mark.parametrize("role,scope", CASES, ids=[f"{r.value}-{s}" for r, s in CASES])
@pytest.mark.parametrize("kind", list(UI_ACTIONS), ids=[k.value for k in UI_ACTIONS])
async def test_actions_for_every_role_through_the_ui(tmp_path, kind, role, scope) -> None:
    pane_key, pane_id, table_id, key, action, params = UI_ACTIONS[kind]
    async with console_app(tmp_path, role) as (app, pilot, secret):
        if table_id == "cron-table":
            await pilot.press("3", "c")
        await set_the_scene(app, kind, scope)
        await select_row(app, pilot, pane_key, table_id, row_key(app, kind, scope))
        pane = app.query_one(f"#{pane_id}-pane")
        audit = app.core.services.guard.audit
        before = len(audit.records())
        if not expected_allowed(kind, role, scope):
            assert pane.check_action(action, params) is None  # dimmed in the footer, the key does nothing
            reason = app.core.services.guard.why_not(kind, namespace=OTHER_NS if scope == "other" else OWN_NS)
            assert (key, reason) in pane.access_reasons()
            keys, _, first = access_line(app, pane_id).partition(" — ")
            assert key in keys.split() and first == pane.access_reasons()[0][1]
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert len(audit.records()) == before  # nothing was attempted
            return
        assert pane.check_action(action, params) is True
        assert access_line(app, pane_id) == "" or kind.value not in access_line(app, pane_id)
        # The form's preset is an automatic budget: adding one needs MFA like a destructive action.
        asks_mfa = role is Role.ADMIN and (needs_mfa_kind(kind) or kind is ActionKind.BUDGET_ADD)
        await pilot.press(key)
        await pilot.pause()
        if kind is ActionKind.BUDGET_ADD:  # the form: its preset "alert and pause at $1,000", saved
            await pilot.press("f2", "ctrl+s")
            await pilot.pause()
        if kind.destructive or isinstance(app.screen, ConfirmScreen):
            assert isinstance(app.screen, ConfirmScreen)
            if kind is ActionKind.TERMINATE:
                app.screen.query_one(Input).value = INSTANCE  # typed, not y
                await pilot.press("enter")
            else:
                await pilot.press("y")
        if asks_mfa:
            await wait_until(lambda: isinstance(app.screen, MfaPrompt))
            app.screen.query_one(Input).value = "000000" if code_at(secret, NOW) != "000000" else "111111"
            await pilot.press("enter")
            await wait_until(lambda: "wrong code" in str(app.screen.query_one("#mfa-error").content))
            app.screen.query_one(Input).value = code_at(secret, NOW)
            await pilot.press("enter")
        # The intent ("started") is written before the action runs; wait for the outcome after it.
        await wait_until(lambda: any(r.action == kind.value and r.result != "started" for r in audit.records()[before:]))
        last = [r for r in audit.records() if r.action == kind.value and r.result != "started"][-1]
        assert (last.actor, last.role, last.result) == (NAMES[role], role.value, "ok")
        if asks_mfa:
            mfa = [r.result.split(" (")[0] for r in audit.records()[before:] if r.action == "mfa-verify"]
            assert mfa == ["denied: wrong code", "ok"]


async def test_cancelling_the_mfa_prompt_runs_nothing(tmp_path) -> None:
    async with console_app(tmp_path, Role.ADMIN) as (app, pilot, _secret):
        await select_row(app, pilot, "4", "instance-table", INSTANCE)
        await pilot.press("s", "y")
        await wait_until(lambda: isinstance(app.screen, MfaPrompt))
        await pilot.press("escape")
        await pilot.pause()
        state = next(i.state for i in app.snapshot.instances if i.instance_id == INSTANCE)
        assert state is InstanceState.RUNNING
        assert not [r for r in app.core.services.guard.audit.records() if r.action == "stop"]


async def test_read_only_disables_every_change_and_says_so(tmp_path) -> None:
    async with console_app(tmp_path, Role.ADMIN, read_only=True) as (app, pilot, _secret):
        assert "READ-ONLY" in str(app.query_one("#top-bar").content)
        await select_row(app, pilot, "4", "instance-table", INSTANCE)
        assert "--read-only" in access_line(app, "instances")
        pane = app.query_one("#instances-pane")
        for verb in ("stop", "start", "reboot", "terminate"):
            assert pane.check_action("instance", (verb,)) is None
        assert pane.check_action("new_instance", ()) is None


async def test_the_audit_pane_filters_exports_and_analyses_usage(tmp_path) -> None:
    async with console_app(tmp_path, Role.AUDITOR) as (app, pilot, _secret):
        audit = app.core.services.guard.audit
        audit.append("dev", "developer", "delete-job", "team-nlp/a", (("kind", "Job"),), "ok")
        audit.append("ada", "admin", "stop", "i-1", (), "ok")
        audit.append("aud", "auditor", "stop", "i-2", (), "denied: auditors may change nothing")
        await pilot.press("6")
        await pilot.pause()
        pane = app.query_one("#audit-pane")
        pane.reload()
        t = table(app, "audit-table")
        await wait_until(lambda: len(t.shown_keys) == 3)
        pane.set_filters(actor="ad")
        await wait_until(lambda: t.shown_keys == ["2"])
        pane.set_filters(action="stop", period="2027-01-14")
        await wait_until(lambda: t.shown_keys == [])  # the records are of the audit clock's day, the 15th
        pane.set_filters(action="stop", period="2027-01-15..2027-01-16")
        await wait_until(lambda: t.shown_keys == ["3", "2"])
        await pilot.press("E")
        exports = paths.demo_exports_dir()  # the session is a demo: its exports outlive it
        await wait_until(lambda: exports.exists() and any(exports.glob("*.json")))
        doc = json.loads(next(exports.glob("*.json")).read_text())
        assert [r["seq"] for r in doc["records"]] == [2, 3]
        await pilot.press("e")
        await wait_until(lambda: any(exports.glob("*.csv")))
        await pilot.press("u")
        await pilot.pause()
        usage = str(app.query_one("#usage-view").content)
        assert "GPU-hours" in usage and "per user" in usage and "per namespace" in usage
        await pilot.press("v")
        await wait_until(lambda: "chain verified" in pane.note)


async def test_a_developer_may_not_read_the_audit_pane(tmp_path) -> None:
    async with console_app(tmp_path, Role.DEVELOPER) as (app, pilot, _secret):
        assert "dev · developer (team-nlp, chat)" in str(app.query_one("#top-bar").content)
        await pilot.press("6")
        await pilot.pause()
        pane = app.query_one("#audit-pane")
        await wait_until(lambda: pane.query_one("#audit-denied").display)
        assert "only admins and auditors read the audit log" in str(pane.query_one("#audit-denied").content)
        assert not table(app, "audit-table").display


@pytest.mark.parametrize("role,scope", CASES, ids=[f"{r.value}-{s}" for r, s in CASES])
async def test_submitting_through_the_wizard_for_every_role(tmp_path, role, scope) -> None:
    """The submit wizard: an auditor cannot open it; a developer may submit into its namespace
    only (the core refuses another, and the audit log says so); an admin anywhere."""
    from gpuconsole.ui.wizards.submit import SubmitWizard
    from tests.test_jobs_pane import fill, open_submit, to_review

    ns = OWN_NS if scope == "own" else OTHER_NS
    async with console_app(tmp_path, role) as (app, pilot, secret):
        audit = app.core.services.guard.audit
        before = len(audit.records())
        await pilot.press("3")
        await pilot.pause()
        pane = app.query_one("#jobs-pane")
        if role is Role.AUDITOR:
            assert pane.check_action("submit", ()) is None
            await pilot.press("N")
            await pilot.pause()
            assert not isinstance(app.screen, SubmitWizard)
            assert len(audit.records()) == before
            return
        wizard = await open_submit(app, pilot)
        await pilot.press(*"matrix-job")
        await fill(pilot, wizard, "job-namespace", ns)
        await to_review(pilot, wizard)
        if wizard.can_submit:
            await pilot.press("ctrl+n")
            if role is Role.ADMIN and needs_mfa_kind(ActionKind.SUBMIT_JOB):
                await wait_until(lambda: isinstance(app.screen, MfaPrompt))
                app.screen.query_one(Input).value = code_at(secret, NOW)
                await pilot.press("enter")
        await wait_until(lambda: any(r.action == "submit-job" and r.result != "started" for r in audit.records()[before:]))
        last = [r for r in audit.records() if r.action == "submit-job" and r.result != "started"][-1]
        assert (last.actor, last.role, last.target) == (NAMES[role], role.value, f"{ns}/matrix-job")
        if expected_allowed(ActionKind.SUBMIT_JOB, role, scope):
            assert last.result == "ok"
            await wait_until(lambda: any(j.name == "matrix-job" and j.namespace == ns for j in app.snapshot.jobs))
        else:
            assert last.result.startswith("denied: ") and ns in last.result
            assert not any(j.name == "matrix-job" for j in app.snapshot.jobs)


@pytest.mark.parametrize("role,scope", CASES, ids=[f"{r.value}-{s}" for r, s in CASES])
async def test_launching_through_the_wizard_for_every_role(tmp_path, role, scope) -> None:
    """Only an admin may launch: for the others ``n`` is disabled with the reason; an admin
    goes through the wizard, gives its MFA code where one is needed, and the launch is audited."""
    from gpuconsole.model import Market
    from gpuconsole.ui.wizards.provision import ProvisionWizard
    from tests.test_wizard import (
        choose_type,
        choose_zone,
        launch,
        open_wizard,
        to_review,
    )

    async with console_app(tmp_path, role) as (app, pilot, secret):
        audit = app.core.services.guard.audit
        before = len(audit.records())
        await pilot.press("4")
        await pilot.pause()
        pane = app.query_one("#instances-pane")
        if not expected_allowed(ActionKind.LAUNCH, role, scope):
            assert pane.check_action("new_instance", ()) is None
            assert ("n", app.core.services.guard.why_not(ActionKind.LAUNCH)) in pane.access_reasons()
            await pilot.press("n")
            await pilot.pause()
            assert not isinstance(app.screen, ProvisionWizard)
            assert len(audit.records()) == before
            return
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p4de.24xlarge")
        await choose_zone(pilot, wizard, "us-east-1a", Market.ON_DEMAND)
        await to_review(pilot, wizard)
        assert wizard.review_step.can_launch, wizard.review_step.dry_run_message
        if needs_mfa_kind(ActionKind.LAUNCH):
            await pilot.press("ctrl+n")
            await wait_until(lambda: isinstance(app.screen, MfaPrompt))
            app.screen.query_one(Input).value = code_at(secret, NOW)
            await pilot.press("enter")
            await wait_until(lambda: not wizard.launch_step.running and wizard.step == 4)
        else:
            await launch(pilot, wizard)
        await wait_until(lambda: any(r.action == "launch" and r.result != "started" for r in audit.records()[before:]))
        last = [r for r in audit.records() if r.action == "launch" and r.result != "started"][-1]
        assert (last.actor, last.role, last.target, last.result) == (NAMES[role], role.value, "p4de.24xlarge", "ok")


async def test_the_audit_panes_verify_of_a_copy_it_cannot_read_is_not_called_tampering(tmp_path) -> None:
    """``v`` with a CloudWatch copy that cannot be read (nothing listens at its pinned endpoint):
    the note says the log cannot be verified, as ``audit verify`` does, never TAMPERED."""
    from gpuconsole.core.access import audit_sink
    from tests.aws_peer import free_port

    async with console_app(tmp_path, Role.ADMIN) as (app, pilot, _secret):
        audit = app.core.services.guard.audit
        audit.append("ada", "admin", "stop", "i-1", (), "ok")
        audit_sink.attach(audit, audit_sink.SinkSettings(log_group="/gpuconsole/audit", region="us-east-1",
                                                         endpoint_url=f"http://127.0.0.1:{free_port()}"))
        await pilot.press("6")
        await pilot.pause()
        pane = app.query_one("#audit-pane")
        await pilot.press("v")
        await wait_until(lambda: "verif" in pane.note, timeout=60)
        assert pane.note.startswith("cannot be verified: cannot read the remote copy"), pane.note
        assert "TAMPERED" not in pane.note
    audit_sink.close_all()
