"""A users table with one user of each role, and one door per action kind, for the matrix tests.

Users: ``ada`` (admin, MFA enrolled), ``dev`` (developer in ``team-nlp`` and ``chat``), ``aud``
(auditor). ``own`` targets live in ``team-nlp`` (an inference service: in ``chat``), ``other``
targets in ``research``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuconsole.core.access.access import JOB_KINDS, Role, UsersTable, is_process_kill
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.guard import Guard
from gpuconsole.core.access.mfa import MfaStore, code_at
from gpuconsole.core.ops.actions import ActionKind, ActionRequest, run_action
from gpuconsole.core.ops.manifests import JobRequest
from gpuconsole.model import Budget, LaunchSpec

NAMES = {Role.ADMIN: "ada", Role.DEVELOPER: "dev", Role.AUDITOR: "aud"}
OWN_NS, OTHER_NS = "team-nlp", "research"
# (role, scope): the rows of the matrix. Scope only matters to a developer.
# The kinds of the fleet matrix; rotating one's own IAM key (key-*) acts on no fleet target and
# is covered by tests/test_key_rotation.py.
FLEET_KINDS = [k for k in ActionKind if not k.value.startswith("key-")]
CASES = [(Role.ADMIN, "own"), (Role.DEVELOPER, "own"), (Role.DEVELOPER, "other"), (Role.AUDITOR, "own")]
# Jobs and CronJobs of the seeded demo world (seed 7) in each namespace.
JOBS = {OWN_NS: "mistral-lora-rdlb2", OTHER_NS: "moe-ablation-f5j4t"}
# A job of each namespace whose pods run GPU processes (the other namespace's is its MPIJob).
PROCESS_JOBS = {OWN_NS: "mistral-lora-rdlb2", OTHER_NS: "nccl-allreduce"}
CRONJOBS = {OWN_NS: "nightly-eval", OTHER_NS: "weekly-benchmark"}
# Inference services of the demo's pool: the developer's own (in chat) and another namespace's.
SERVICE_NS = "chat"
SERVICES = {"own": f"{SERVICE_NS}/vllm-llama3", "other": f"{OTHER_NS}/notebook-llm"}
INSTANCE = "i-6830e07bc1e398f10"
KILLED: dict[str, int] = {}  # namespace → the pid the kill door signalled


def make_home(root: Path, clock: Callable[[], float]) -> tuple[UsersTable, MfaStore, AuditLog, str]:
    """The users table (ada, dev, aud), ada's MFA secret, and the audit log, under ``root``."""
    users = UsersTable(root / "config" / "users.json")
    users.init("ada")
    users.add("dev", Role.DEVELOPER, (OWN_NS, SERVICE_NS))
    users.add("aud", Role.AUDITOR)
    mfa = MfaStore(root / "data" / "mfa.json", clock)
    secret, _uri = mfa.enroll("ada")
    return users, mfa, AuditLog(root / "state" / "audit.db", clock), secret


def use_home(root: Path, clock: Callable[[], float], setenv: Callable[[str, str], None]) -> tuple[UsersTable, MfaStore, AuditLog, str]:
    """:func:`make_home`, with gpuconsole's environment pointed at it (``setenv``: monkeypatch's),
    and the demo's own audit log and MFA state kept under ``root/demo``, to read."""
    users, mfa, audit, secret = make_home(root, clock)
    setenv("GPUCONSOLE_USERS", str(users.path))
    setenv("GPUCONSOLE_MFA", str(mfa.path))
    setenv("GPUCONSOLE_AUDIT_DB", str(audit.path))
    setenv("GPUCONSOLE_DEMO_DIR", str(root / "demo"))
    return users, mfa, audit, secret


def guard_for(role: Role, users: UsersTable, mfa: MfaStore, audit: AuditLog, *, read_only: bool = False) -> Guard:
    return Guard(users, mfa, audit, user=NAMES[role], read_only=read_only)


def expected_allowed(kind: ActionKind, role: Role, scope: str) -> bool:
    """The matrix of the issue, written out independently of the code under test."""
    if kind is ActionKind.NOTIFY:
        return role is not Role.AUDITOR  # an auditor's console shows banners; its hooks never run
    if role is Role.ADMIN:
        return True
    if role is Role.AUDITOR:
        return False
    if kind in JOB_KINDS or is_process_kill(kind):
        return scope == "own"
    return False


def door(console, kind: ActionKind, scope: str) -> Callable[[], object]:
    """The core call that runs ``kind`` on a target in the ``scope`` namespace."""
    ns = OWN_NS if scope == "own" else OTHER_NS
    jobs, cloud, budgets = console.services.jobs, console.services.cloud, console.services.budget_ops
    job, cron = JOBS[ns], CRONJOBS[ns]
    doors: dict[ActionKind, Callable[[], object]] = {
        ActionKind.LAUNCH: lambda: cloud.launch(LaunchSpec("us-east-1", "g5.xlarge", "ami-0123456789abcdef0"),
                                                try_alternatives=False),
        ActionKind.START: lambda: cloud.perform(ActionRequest(ActionKind.START, INSTANCE, "us-east-1")),
        ActionKind.STOP: lambda: cloud.perform(ActionRequest(ActionKind.STOP, INSTANCE, "us-east-1", "yes")),
        ActionKind.REBOOT: lambda: cloud.perform(ActionRequest(ActionKind.REBOOT, INSTANCE, "us-east-1", "yes")),
        ActionKind.TERMINATE: lambda: cloud.perform(ActionRequest(ActionKind.TERMINATE, INSTANCE, "us-east-1", INSTANCE)),
        ActionKind.SUBMIT_JOB: lambda: jobs.submit(JobRequest("matrix-job", ns, image="busybox")),
        ActionKind.DELETE_JOB: lambda: jobs.delete("Job", ns, job, "yes"),
        ActionKind.SUSPEND_JOB: lambda: jobs.suspend("Job", ns, job, "yes"),
        ActionKind.RESUME_JOB: lambda: jobs.resume("Job", ns, job),
        ActionKind.SUSPEND_CRONJOB: lambda: jobs.suspend("CronJob", ns, cron, "yes"),
        ActionKind.TRIGGER_CRONJOB: lambda: jobs.trigger(ns, cron),
        ActionKind.BUDGET_ADD: lambda: budgets.add(Budget(name="matrix", amount=100.0)),
        ActionKind.BUDGET_REMOVE: lambda: (_unguarded(console, lambda: budgets.add(Budget(name="matrix", amount=1.0))),
                                           budgets.remove("matrix")),
        ActionKind.KILL_PROCESS: lambda: _kill_a_process_of(console, ns, PROCESS_JOBS[ns]),
    }
    if kind in doors:
        return doors[kind]
    # Kinds without a door of their own (notify, users, and any added later) take the path directly.
    request = ActionRequest(kind, f"{ns}/matrix-target", params=(("namespace", ns),))
    return lambda: run_action(request, lambda: f"{kind.value} done", console.services.actions)


def _kill_a_process_of(console, ns: str, job_name: str) -> object:
    """SIGTERM a GPU process of the job ``job_name``: the console polls once to see it."""
    console.start(open_store=False)
    console.wait_for_first_answers(10)
    snap = console.snapshot
    job = next(j for j in snap.jobs if j.namespace == ns and j.name == job_name)
    gpu, proc = next((g, p) for g in snap.gpus for p in g.processes if job.owns_pod(p.pod_uid))
    KILLED[ns] = proc.pid
    return console.services.gpus.kill(gpu.uuid, proc.pid, "SIGTERM", "yes")


def _unguarded(console, call: Callable[[], object]) -> None:
    """Set the scene (a budget to remove) without the guard."""
    guard, console.services.actions.guard = console.services.actions.guard, None
    try:
        call()
    finally:
        console.services.actions.guard = guard


def target_of(kind: ActionKind, scope: str) -> str:
    ns = OWN_NS if scope == "own" else OTHER_NS
    targets = {
        ActionKind.LAUNCH: "g5.xlarge", ActionKind.START: INSTANCE, ActionKind.STOP: INSTANCE,
        ActionKind.REBOOT: INSTANCE, ActionKind.TERMINATE: INSTANCE, ActionKind.SUBMIT_JOB: f"{ns}/matrix-job",
        ActionKind.DELETE_JOB: f"{ns}/{JOBS[ns]}", ActionKind.SUSPEND_JOB: f"{ns}/{JOBS[ns]}",
        ActionKind.RESUME_JOB: f"{ns}/{JOBS[ns]}", ActionKind.SUSPEND_CRONJOB: f"{ns}/{CRONJOBS[ns]}",
        ActionKind.TRIGGER_CRONJOB: f"{ns}/{CRONJOBS[ns]}", ActionKind.BUDGET_ADD: "matrix",
        ActionKind.BUDGET_REMOVE: "matrix",
    }
    if kind is ActionKind.KILL_PROCESS:
        return str(KILLED[ns])
    return targets.get(kind, f"{ns}/matrix-target")


def open_mfa(guard: Guard, secret: str, now: float) -> None:
    """Give the admin's current code (the guard's clock is the MFA store's)."""
    guard.verify_mfa(code_at(secret, now))
