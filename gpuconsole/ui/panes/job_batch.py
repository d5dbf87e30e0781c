"""The Jobs pane's actions on tagged rows: delete or suspend every tagged job or CronJob after
one confirmation that lists each with what its GPUs cost per hour."""

from __future__ import annotations

from typing import Any

from gpuconsole.core.money.attribution import job_rate
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import CronJob, Job, JobState
from gpuconsole.ui.actions import Action, Confirm, batch, run_action

def on_tagged(pane: Any, verb: str) -> bool:  # the Jobs pane (its module imports this one)
    """``delete`` / ``suspend`` on every tagged row of the current table, after one
    confirmation listing each with what it costs per hour; False when none is tagged."""
    table, snap = pane.current_table(), pane.snapshot
    keys = table.tagged_keys() if table.id in ("job-table", "cron-table") else []
    if not keys or snap is None:
        return False
    if not pane.core.services.jobs.available:
        pane.app.notify("This job source cannot change jobs.", severity="warning")
        return True
    cron = table.id == "cron-table"
    by_key = (pane.crons if cron else pane.jobs).by_key
    items: list[Job | CronJob] = [by_key[k] for k in keys if k in by_key]
    if verb == "suspend":
        items = [i for i in items if (not i.suspended if isinstance(i, CronJob)
                                      else i.state in (JobState.PENDING, JobState.RUNNING))]
    kind = "CronJob" if cron else "Job"
    if not items:
        pane.app.notify(f"None of the tagged {kind}s can be {verb}ed now.", severity="warning")
        return True
    rates = {} if cron else {j.uid: job_rate(snap, j) for j in items if isinstance(j, Job)}
    lines, hourly = [], 0.0
    for item in items:
        rate = rates.get(item.uid)
        hourly += rate or 0.0
        cost = "" if cron else ("  $/h unknown" if rate is None and item.node else f"  ${rate or 0:,.2f}/h")
        lines.append(f"{item.namespace}/{item.name}{cost}")
    jobs = pane.core.services.jobs
    act = jobs.delete if verb == "delete" else jobs.suspend
    changes = [(f"{i.namespace}/{i.name}", lambda answer, i=i: act(kind, i.namespace, i.name, answer or ""))
               for i in items]
    total = f"{len(items)} {kind}s" + ("" if cron else f" · ${hourly:,.2f}/h of GPUs held now")
    call = batch(verb, f"{kind}s", changes, after=lambda: pane.app.call_from_thread(table.untag))
    action_kind = ActionKind.DELETE_JOB if verb == "delete" else (
        ActionKind.SUSPEND_CRONJOB if cron else ActionKind.SUSPEND_JOB)
    run_action(pane, Action(f"{verb} {len(items)} {kind}s", call, action_kind, group="job-action",
                            confirm=Confirm(f"{verb.capitalize()} {len(items)} {kind}s",
                                            f"{verb.capitalize()} these {len(items)} {kind}s? (y/n)",
                                            targets=tuple(lines), total=total, cancelled=f"{verb} cancelled")))
    return True
