"""``access whoami``: who the console acts as, in gpuconsole and in each system that owns resources.

The answer is a list of sections, each made by one provider in :data:`SECTIONS`; a provider is a
function of a :class:`WhoamiContext` that returns its fields plus ``missing``, the steps that
would set it up. A new system is one more provider appended to the list. A provider that fails
gives a section with its error: one system down never hides the others.

The Kubernetes section asks the cluster, not the kubeconfig alone: the user is the one the API
server authenticates (``SelfSubjectReview``; the kubeconfig's user name where the server is
older), and what it may do to jobs in each watched namespace is RBAC's answer
(``SelfSubjectAccessReview``, :mod:`gpuconsole.core.access.rbac`). The TLS section reads the
floor in force and the versions the sources negotiated from :mod:`gpuconsole.backends.tls`: the
console sets that floor from ``[tls] min_version`` when it starts, so this module needs nothing
of the fleet's configuration (the fleet is above access).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends import tls
from gpuconsole.backends.base import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    CallerIdentity,
    CredentialSwitching,
    JobBackend,
    KubeconfigContexts,
    NamedProfile,
    SetupHint,
    one_line,
)
from gpuconsole.core.access.aws_roles import AwsRoleSessions, os_login
from gpuconsole.core.access.rbac import ClusterPermissions, job_permissions
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import SourceKind


@dataclass(frozen=True, slots=True)
class WhoamiContext:
    """What the providers may look at.

    Attributes:
        guard: the action path's guard (login, users table, MFA state).
        cloud: the cloud backend (an AWS one has ``profile``), or None.
        aws_roles: the role sessions when ``[aws.roles]`` is set, else None.
        sts: STS as the login (``StsCalls``), or None when AWS is not configured.
        jobs: the job backend, for the Kubernetes section (a Kubernetes one has ``kubeconfig``,
            ``context``, ``namespaces`` and ``job_control``; an unconfigured one ``reason``
            and ``hint``).
        rbac: the console's kept RBAC answers; None asks over a connection of its own.
    """

    guard: Any
    cloud: Any = None
    aws_roles: AwsRoleSessions | None = None
    sts: Any = None
    jobs: Any = None
    rbac: ClusterPermissions | None = None


Section = Callable[[WhoamiContext], "dict[str, Any] | None"]  # None: a system this console does not watch


def login_section(ctx: WhoamiContext) -> dict[str, Any]:
    principal = ctx.guard.principal
    missing = []
    if not principal.managed:
        missing.append("no users table: run gpuconsole users init to give logins roles")
    elif principal.role is None:
        missing.append(f"{principal.name} is not in the users table: ask an admin to add you")
    return {"login": os_login(), "user": principal.name, "role": principal.role_text,
            "namespaces": list(principal.namespaces), "read_only": bool(ctx.guard.read_only), "missing": missing}


def aws_section(ctx: WhoamiContext) -> dict[str, Any]:
    if ctx.sts is None:
        return {"configured": False, "missing": ["configure AWS credentials (aws configure, or AWS_PROFILE) "
                                                 "and a region"]}
    profile = ctx.cloud.profile if isinstance(ctx.cloud, NamedProfile) else None
    section: dict[str, Any] = {"configured": True, "profile": profile or "default chain",
                               "missing": []}
    try:
        me = ctx.sts.caller_identity()
        section.update(account=me.account, caller=me.arn)
    except BackendError as exc:
        section["caller_error"] = one_line(exc)
    roles = ctx.aws_roles
    if roles is None:
        section.update(acts_as="the login's own credentials (no [aws.roles])")
        section["missing"].append("map gpuconsole roles to IAM roles in [aws.roles] of the configuration file "
                                  "(gpuconsole access iam-policy prints them)")
    else:
        section.update(role_arn=roles.role_arn or "none for this role")
        if not roles.role_arn:
            role = ctx.guard.principal.role_text
            section["missing"].append(f"[aws.roles] names no IAM role for {role}: AWS calls are refused")
        try:
            session = roles.credentials()
            section.update(acts_as=ctx.sts.caller_identity(session).arn, session_expires=session.expires_at)
        except BackendError as exc:
            section.update(acts_as="", session_error=one_line(exc))
    try:
        section["tls"] = ctx.sts.tls_version()
    except BackendError as exc:
        section["tls"] = f"unknown ({one_line(exc)})"
    section["tls_floor"] = "TLS 1.2 (botocore)"
    return section


def cloud_identities(ctx: WhoamiContext) -> list[Any]:
    """The watched clouds that say whom their calls run as (each member of a cloud set)."""
    members = getattr(ctx.cloud, "members", None)
    clouds = list(members.values()) if isinstance(members, dict) else [ctx.cloud]
    return [c for c in clouds if isinstance(c, CallerIdentity)]


def alibaba_section(ctx: WhoamiContext) -> dict[str, Any] | None:
    """Alibaba Cloud's caller (STS GetCallerIdentity), when the console watches it."""
    found = [c for c in cloud_identities(ctx) if c.name == "alibaba"]
    if not found:
        return None
    cloud = found[0]
    section: dict[str, Any] = {"configured": True, "profile": getattr(cloud, "profile", None) or "default chain",
                               "missing": []}
    roles = getattr(ctx.guard, "alibaba_roles", None)
    try:
        section.update(cloud.caller_identity())  # under [alibaba.roles]: the role session's caller
    except BackendError as exc:
        section["caller_error"] = one_line(exc)
    if roles is not None:
        section["roles"] = roles.describe()
    return section


def azure_section(ctx: WhoamiContext) -> dict[str, Any] | None:
    """Azure's principal (from its access token) and its role assignments at the subscription:
    Azure RBAC decides each call with the login's own credential."""
    found = [c for c in cloud_identities(ctx) if c.name == "azure"]
    if not found:
        return None
    cloud = found[0]
    section: dict[str, Any] = {"configured": True, "subscription": getattr(cloud, "subscription", ""),
                               "acts_as": "the login's own credential (Azure RBAC decides)", "missing": []}
    try:
        section.update(cloud.caller_identity())
        section["role_assignments"] = [f"{a['role']} at {a['scope']}" for a in cloud.role_assignments()]
    except BackendError as exc:
        section["caller_error"] = one_line(exc)
    if section.get("role_assignments") == []:
        section["missing"].append("the principal has no role assignment at the subscription: every call is refused")
    return section


def mfa_section(ctx: WhoamiContext) -> dict[str, Any]:
    guard = ctx.guard
    enrolled = bool(guard.mfa.enrolled(guard.user))
    section: dict[str, Any] = {"local_enrolled": enrolled, "local_window_open": bool(
        enrolled and guard.mfa.fresh(guard.user, guard.users.mfa_window_s()))}
    missing = []
    roles = ctx.aws_roles
    if roles is not None and roles.needs_mfa:
        section["aws_serial"] = roles.settings.mfa_serial or "from IAM ListMFADevices"
        section["aws_session_open"] = not roles.needs_code()
        section["aws_checks_codes_for"] = sorted(k.value for k in ActionKind if guard.aws_checks_mfa(k))
    elif guard.principal.role_text == "admin" and not enrolled:
        missing.append("enrol MFA: gpuconsole users mfa enroll")
    section["missing"] = missing
    return section


NO_CLUSTER = "no Kubernetes cluster configured"
EVERY_NAMESPACE = "*"  # the key of a cluster-wide answer, when every namespace is watched


def kubernetes_section(ctx: WhoamiContext) -> dict[str, Any]:
    """The Kubernetes user (the cluster's name for it, else the kubeconfig's) and, per watched
    namespace, what RBAC lets it do to jobs."""
    jobs = ctx.jobs
    if not isinstance(jobs, KubeconfigContexts):
        return _no_cluster(jobs)
    from gpuconsole.backends.registry import kubeconfig_user  # the kubernetes client is imported only here

    try:
        names = kubeconfig_user(jobs.kubeconfig, jobs.context)
    except BackendUnavailable as exc:
        return {"configured": False, "problem": one_line(exc), "missing": [exc.hint or NO_CLUSTER]}
    section: dict[str, Any] = {"configured": True, "context": names["context"], "cluster": names["cluster"],
                               "kubeconfig_user": names["user"]}
    try:
        section.update(_cluster_user(jobs.job_control, names["user"]))
    except BackendTimeout as exc:  # a silent server would make every RBAC question wait as long
        section.update(user=names["user"], user_from="the kubeconfig", problem=one_line(exc), jobs={}, missing=[])
        return section
    section["jobs"] = {ns or EVERY_NAMESPACE: (ctx.rbac.job_permissions(ns) if ctx.rbac is not None
                                               else job_permissions(ns, jobs.kubeconfig, jobs.context))
                       for ns in watched_namespaces(jobs, ctx.guard.principal)}
    section["missing"] = []
    return section


def watched_namespaces(jobs: Any, principal: Any) -> tuple[str, ...]:
    """The namespaces the console watches (``--namespace``); else a developer's namespaces of the
    users table (the only ones the guard lets them act in); else ``""``: every namespace."""
    if jobs.namespaces:
        return tuple(jobs.namespaces)
    if principal.role_text == "developer" and principal.namespaces and "*" not in principal.namespaces:
        return tuple(principal.namespaces)
    return ("",)


def _cluster_user(control: Any, kubeconfig_name: str) -> dict[str, Any]:
    """Who the API server says the credentials are; the kubeconfig's name where it cannot say.

    Raises:
        BackendTimeout: the API server did not answer in time.
    """
    try:
        found = control.identity()
    except BackendTimeout:
        raise
    except BackendError as exc:
        return {"user": kubeconfig_name, "user_from": f"the kubeconfig (the cluster could not say: {one_line(exc)})"}
    if found is None:
        return {"user": kubeconfig_name, "user_from": "the kubeconfig (the API server has no SelfSubjectReview)"}
    user, groups = found
    return {"user": user, "user_from": "the cluster (SelfSubjectReview)", "groups": list(groups)}


def _no_cluster(jobs: Any) -> dict[str, Any]:
    """The section of a job source with no cluster: unconfigured (what to do), or simulated."""
    if isinstance(jobs, SetupHint):
        return {"configured": False, "problem": str(jobs.reason), "missing": [str(jobs.hint)]}
    if jobs is not None:
        name = str(jobs.name) if isinstance(jobs, JobBackend) else "this"
        return {"configured": False, "cluster": f"none: the {name} job source has no RBAC to ask", "missing": []}
    return {"configured": False, "problem": NO_CLUSTER,
            "missing": ["point KUBECONFIG at a kubeconfig, create ~/.kube/config, or pass --kubeconfig PATH"]}


def tls_section(ctx: WhoamiContext) -> dict[str, Any]:
    """The TLS floor in force and the version each source negotiated in this process (shown
    after the Kubernetes section, whose questions open that source's connection)."""
    summary = tls.summary()
    floor = tls.minimum_version()
    section: dict[str, Any] = {
        "min_version": summary["min_version"],
        "min_version_from": "default" if floor == tls.DEFAULT_MINIMUM else "[tls] min_version",
        "negotiated": summary["negotiated"],
        "aws": "botocore's own floor, TLS 1.2 (its version: see aws)",
        "missing": [],
    }
    if floor != tls.DEFAULT_MINIMUM:
        section["missing"].append(f"[tls] min_version = \"{floor}\" lowers the floor: remove it once every "
                                  f"server speaks TLS {tls.DEFAULT_MINIMUM}")
    return section


# The sections, in the order shown; append a provider to add one.
SECTIONS: list[tuple[str, Section]] = [
    ("gpuconsole", login_section),
    ("aws", aws_section),
    ("alibaba", alibaba_section),
    ("azure", azure_section),
    ("mfa", mfa_section),
    ("kubernetes", kubernetes_section),
    ("tls", tls_section),
]


def whoami(ctx: WhoamiContext) -> dict[str, dict[str, Any]]:
    """Every section of :data:`SECTIONS` for ``ctx`` (blocking: STS calls; call off the UI thread)."""
    answer = {}
    for name, provider in SECTIONS:
        try:
            section = provider(ctx)
            if section is not None:  # a system this console does not watch
                answer[name] = section
        except Exception as exc:  # noqa: BLE001 - one failing system never hides the others
            answer[name] = {"error": one_line(exc), "missing": []}
    return answer


def context_for(console: Any) -> WhoamiContext:
    """The context of a running console (its guard, sources and AWS role sessions)."""
    services = console.services
    cloud, jobs = console.source(SourceKind.CLOUD), console.source(SourceKind.JOBS)
    roles = services.aws_roles
    sts = roles.sts if roles is not None else None
    if sts is None and isinstance(cloud, CredentialSwitching):
        from gpuconsole.backends.registry import sts_calls

        sts = sts_calls(cloud.profile if isinstance(cloud, NamedProfile) else None)
    return WhoamiContext(services.guard, cloud, roles, sts, jobs, services.rbac)
