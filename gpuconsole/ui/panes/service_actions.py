"""What the Services pane and the service view do to a service: scale, rollout restart, a
replica's log, describe.

A scale spends money: ``s`` asks for the replicas in a field (a bad number is one line under
it, the field keeps what was typed), then a y/n confirmation that says what the change costs an
hour. The confirmation is the console's one (:class:`~gpuconsole.ui.screens.confirm.ConfirmScreen`),
so a key typed ahead of it never answers it. The change runs through the action runner
(:mod:`gpuconsole.ui.actions`), so the role, the namespace, MFA (an admin taking a service to
zero) and the audit are the core's.
"""

from __future__ import annotations

from typing import Any

from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import Service
from gpuconsole.ui import service_words as words
from gpuconsole.ui.access import why_not
from gpuconsole.ui.actions import Action, Confirm, run_action
from gpuconsole.ui.format import money


def _ops(node: Any) -> Any:
    """The service operations, or None after saying why this console has none."""
    from gpuconsole.core.ops.service_ops import NOT_A_CLUSTER

    ops = node.app.core.services.service_ops
    if not ops.available:
        node.app.notify(f"{NOT_A_CLUSTER[0].upper()}{NOT_A_CLUSTER[1:]}.", severity="warning", timeout=5)
        return None
    return ops


def _allowed(node: Any, kind: ActionKind, service: Service) -> bool:
    why = why_not(node.app, kind, service.namespace)
    if why:
        node.app.notify(why, severity="warning", timeout=5)
    return not why


def replica_cost(service: Service) -> float | None:
    """What one replica costs an hour (the service's $/h over the replicas that hold GPUs)."""
    holding = sum(1 for r in service.replicas if r.gpus > 0) or service.replicas_ready
    if service.usd_per_hour is None or not holding:
        return None
    return service.usd_per_hour / holding


def scale_words(service: Service, replicas: int) -> str:
    """The lines a scale's confirmation shows: GPUs and $/h before and after, and the HPA."""
    change = replicas - service.replicas_desired
    per_replica = replica_cost(service)
    gpus = f"{abs(change) * service.gpus_per_replica:g} {words.model_words(service) or 'GPU'}"
    lines = [f"{service.kind.value} {service.key}: {service.replicas_desired} → {replicas} replicas "
             f"({'+' if change > 0 else '−'}{gpus})"]
    if per_replica is None:
        lines.append("What this costs is unknown: no price is known for its nodes.")
    else:
        after = per_replica * replicas
        sign = "+" if change > 0 else "−"
        lines.append(f"about {sign}{money(abs(change) * per_replica)}/h: {per_hour(service)} → {money(after)}/h")
    if service.hpa is not None:
        hpa = service.hpa
        lines.append(f"HPA {hpa.name} keeps it between {hpa.min_replicas or 1} and {hpa.max_replicas} replicas "
                     "and may change this again.")
    if replicas == 0:
        lines.append("No replica will serve requests.")
    return "\n".join(lines)


def per_hour(service: Service) -> str:
    return f"{words.per_hour(service.usd_per_hour)}/h"


def ask_scale(node: Any, service: Service) -> None:
    """``s``: ask for the replicas, then confirm what it costs, then scale in a worker."""
    ops = _ops(node)
    if ops is None or not _allowed(node, ActionKind.SCALE_SERVICE, service):
        return
    from gpuconsole.ui.screens.scale_prompt import ScalePrompt

    def chosen(replicas: int | None) -> None:
        if replicas is None:
            node.app.notify("scale cancelled")
            return
        if replicas == service.replicas_desired:
            node.app.notify(f"{service.key} already asks for {replicas} replicas: nothing to change.")
            return
        what = f"scale {service.key} to {replicas}"
        confirm = Confirm(f"Scale {service.kind.value}", f"Scale {service.key} to {replicas} replicas? (y/n)",
                          scale_words(service, replicas), cancelled="scale cancelled")
        run_action(node, Action(what, lambda _answer: ops.scale(service, replicas), ActionKind.SCALE_SERVICE,
                                params=(("namespace", service.namespace), ("replicas", str(replicas))),
                                confirm=confirm, group="service-action"))

    node.app.push_screen(ScalePrompt(service.key, service.replicas_desired, scale_hint(service)), chosen)


def scale_hint(service: Service) -> str:
    """The line over the replicas field: what there is now and what a replica costs."""
    per_replica = replica_cost(service)
    cost = f" · {money(per_replica)}/h a replica" if per_replica is not None else " · $/h a replica unknown"
    hpa = f" · HPA {service.hpa.min_replicas or 1}–{service.hpa.max_replicas}" if service.hpa is not None else ""
    return (f"now {service.replicas_desired} replicas ({service.replicas_ready} ready), "
            f"{service.gpus_per_replica:g} GPU a replica{cost}{hpa}")


def ask_restart(node: Any, service: Service) -> None:
    """``R``: rollout restart after a y/n: every replica is replaced, a few at a time."""
    ops = _ops(node)
    if ops is None or not _allowed(node, ActionKind.RESTART_SERVICE, service):
        return
    confirm = Confirm(f"Restart {service.kind.value}", f"Restart every replica of {service.key}? (y/n)",
                      f"{service.kind.value} {service.key} · {words.ready_words(service)} ready\n"
                      "Each replica is replaced by a new one; a replica being replaced serves nothing.",
                      cancelled="restart cancelled")
    run_action(node, Action(f"restart {service.key}", lambda _answer: ops.restart(service), ActionKind.RESTART_SERVICE,
                            params=(("namespace", service.namespace),), confirm=confirm, group="service-action"))


def open_logs(node: Any, service: Service, pod: str | None) -> None:
    """``l``: the log of replica ``pod`` (None: the first ready one)."""
    ops = _ops(node)
    if ops is None:
        return
    replicas = {r.pod: r for r in service.replicas}
    replica = replicas.get(pod or "") or next((r for r in service.replicas if r.ready), None) or next(
        iter(service.replicas), None)
    if replica is None:
        node.app.notify(f"{service.key} has no replica, so no log.", severity="warning")
        return
    if replica.phase == "Pending":
        node.app.notify(f"{replica.pod} is pending: its log starts when it does.", severity="warning")
        return
    from gpuconsole.ui.screens.logs import LogScreen

    node.app.push_screen(LogScreen(ops, service.namespace, replica.pod, follow=replica.ready,
                                   title=f"{service.key} · pod {replica.pod}"))


def open_describe(node: Any, service: Service) -> None:
    """``D``: the service as YAML with its events."""
    ops = _ops(node)
    if ops is None:
        return
    from gpuconsole.ui.screens.describe import DescribeScreen

    node.app.push_screen(DescribeScreen(ops, service.kind.value, service.namespace, service.name))
