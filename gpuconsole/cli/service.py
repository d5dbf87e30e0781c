"""``gpuconsole service``: list, show, scale and restart inference services from a script.

The same door as the Services pane (:class:`~gpuconsole.core.ops.service_ops.ServiceOps`): a
scale is checked for the login's role and namespaces, MFA where the site wants it (an admin
scaling a service to no replicas), then by the cluster's RBAC, and audited either way.

In JSON a figure that cannot be known is ``null``, never ``0``; ``slo`` is ``null`` for a service
without ``[[services.slo]]``; ``metrics_source`` is ``null`` for a service without metrics.
Exit statuses: 0 done, 1 denied, refused or failed, 2 a bad command line or an unknown service.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from gpuconsole.cli.access import BadInput, CommandFailed, add_mfa_option, ask, ensure_mfa, finish
from gpuconsole.cli.job import _ref
from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of, wrap

if TYPE_CHECKING:
    from gpuconsole.model import FleetSnapshot, Service

SCHEMA = "gpuconsole.services/1"
MAX_REPLICAS = 1000  # as the core takes it (ServiceOps)
# To fit 80 columns the kind gives first, then goes; numbers are whole or dropped.
COLUMNS = (Column("NAMESPACE", give=2, least=9), Column("NAME", key=True), Column("KIND", give=3, drop=True),
           Column("READY", right=True), Column("GPUS", give=1, least=5), Column("RPS", right=True),
           Column("P99", right=True), Column("TOK/S", right=True, drop=True), Column("$/1M", right=True, drop=True),
           Column("$/H", right=True), Column("SLO"))


def _replicas(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of replicas, got {text!r}") from None
    if not 0 <= value <= MAX_REPLICAS:
        raise argparse.ArgumentTypeError(f"replicas must be from 0 to {MAX_REPLICAS}, got {value}")
    return value


def add_service_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    service = sub.add_parser("service", parents=[common], help="list, show or scale inference services",
                             description="Inference services (GPU Deployments, StatefulSets, InferenceServices) "
                                         "with their latency, throughput and cost.")
    verbs = service.add_subparsers(dest="service_command", metavar="ACTION", parser_class=type(service), required=True)
    listing = verbs.add_parser("list", parents=[common], help="every service, grouped by namespace, by $/h")
    show = verbs.add_parser("show", parents=[common], help="one service: figures, replicas, HPA, SLO")
    show.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
    for parser in (listing, show):
        parser.add_argument("--json", dest="service_json", action="store_true", help="print JSON")
        add_wide_option(parser)
    scale = verbs.add_parser("scale", parents=[common], help="set a service's replicas (audited)")
    scale.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
    scale.add_argument("replicas", type=_replicas, metavar="N", help=f"replicas, 0 to {MAX_REPLICAS}")
    add_mfa_option(scale)
    restart = verbs.add_parser("restart", parents=[common], help="rollout restart: every replica replaced (audited)")
    restart.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
    restart.add_argument("--yes", action="store_true", help="restart without asking")
    for parser in (listing, show, scale, restart):
        parser.add_argument("--wait", dest="service_wait", type=float, default=5.0, metavar="S",
                            help="seconds to wait for the sources' first answers (default 5)")


def run_service(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    console = make_console(args)
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(args.service_wait)
        snap = console.compose()
        if args.service_command == "list":
            _list(snap, args, out)
        elif args.service_command == "show":
            _show(find(snap, *args.ref), args, out)
        elif args.service_command == "scale":
            _scale(console, find(snap, *args.ref), args.replicas, args.mfa_code, out)
        else:
            _restart(console, find(snap, *args.ref), args.yes, out)
    finally:
        console.close()
    return 0


def find(snap: FleetSnapshot, namespace: str, name: str) -> Service:
    """The service ``namespace/name`` of ``snap``; :class:`BadInput` (exit 2) naming what there is."""
    from gpuconsole.model import SourceKind, SourceState

    service = next((s for s in snap.services if s.namespace == namespace and s.name == name), None)
    if service is not None:
        return service
    status = snap.source(SourceKind.SERVICES)
    if status is not None and status.state is not SourceState.LIVE:
        raise CommandFailed(f"no service {namespace}/{name} known: the services source is {status.describe(snap.taken_at)}")
    known = ", ".join(s.key for s in snap.services[:8]) or "none"
    raise BadInput(f"no service {namespace}/{name} (services: {known}{', …' if len(snap.services) > 8 else ''})")


def service_document(service: Service, *, replicas: bool = False) -> dict[str, Any]:
    """One service in JSON: the model's fields, ``null`` for what cannot be known; its replicas
    only with ``replicas`` (``service show``)."""
    from gpuconsole.model import to_jsonable

    doc = to_jsonable(service)
    doc["metrics_source"] = service.metrics_source or None
    doc["sources"] = dict(service.sources)
    doc["labels"] = dict(service.labels)
    if not replicas:
        doc.pop("replicas", None)
    return doc


def _list(snap: FleetSnapshot, args: argparse.Namespace, out: TextIO) -> None:
    if args.service_json:
        json.dump({"schema": SCHEMA, "taken_at": snap.taken_at,
                   "services": [service_document(s) for s in snap.services]}, out, indent=2)
        out.write("\n")
        return
    from gpuconsole.ui import service_words as words

    width = width_of(args)
    if not snap.services:
        out.write(wrap(f"no inference services ({_source_words(snap)})", width) + "\n")
        return
    rows = [(s.namespace, s.name, words.kind_words(s, short=True), words.ready_words(s), words.gpu_words(s, short=True),
             words.rate(s.rps), words.latency(s.p99_ms), words.rate(s.tokens_per_s),
             words.unit_price(s.usd_per_million_tokens), words.per_hour(s.usd_per_hour), words.slo_mark(s.slo))
            for s in snap.services]
    out.write("\n".join(render_table(COLUMNS, rows, width)) + "\n")


def _source_words(snap: FleetSnapshot) -> str:
    from gpuconsole.model import SourceKind

    status = snap.source(SourceKind.SERVICES)
    if status is None:
        return "no services source"
    hint = f"; {status.hint}" if status.hint else ""
    return f"services source {status.name}: {status.describe(snap.taken_at)}{hint}"


def _show(service: Service, args: argparse.Namespace, out: TextIO) -> None:
    if args.service_json:
        json.dump(service_document(service, replicas=True), out, indent=2)
        out.write("\n")
        return
    from gpuconsole.ui import service_words as words

    width = width_of(args)
    lines = [wrap(words.summary(service), width)]
    lines += [wrap(line, width) for line in words.facts(service)]
    if service.replicas:
        rows = [(r.pod, r.node or words.UNKNOWN, f"{r.gpus:g}" if not r.mig_profile else r.mig_profile,
                 words.percent(None if r.gpu_utilization is None else r.gpu_utilization / 100, 0),
                 words.count(r.running), words.count(r.waiting), r.phase if r.ready or not r.pending_reason
                 else f"{r.phase}: {r.pending_reason}") for r in service.replicas]
        lines += ["", *render_table(REPLICA_COLUMNS, rows, width)]
    out.write("\n".join(lines) + "\n")


REPLICA_COLUMNS = (Column("POD", key=True), Column("NODE", give=2, least=8), Column("GPUS", right=True),
                   Column("UTIL", right=True), Column("RUNNING", right=True), Column("WAITING", right=True),
                   Column("STATE", give=3, least=7))


def _ops(console: Any) -> Any:
    from gpuconsole.core.ops.service_ops import NOT_A_CLUSTER

    ops = console.services.service_ops
    if not ops.available:
        raise CommandFailed(NOT_A_CLUSTER)
    return ops


def _restart(console: Any, service: Service, yes: bool, out: TextIO) -> None:
    ops = _ops(console)
    if not yes and ask(f"Restart every replica of {service.kind.value} {service.key}? (y/n)").lower() not in ("y", "yes"):
        raise CommandFailed(f"restart of {service.key} not confirmed: answer y, or pass --yes")
    out.write(wrap(ops.restart(service).message) + "\n")


def _scale(console: Any, service: Service, replicas: int, code: str | None, out: TextIO) -> None:
    from gpuconsole.core.ops.actions import ActionKind

    ops = _ops(console)
    guard = console.services.guard
    params = (("namespace", service.namespace), ("replicas", str(replicas)))
    if guard.why_not(ActionKind.SCALE_SERVICE, service.key, service.namespace) is None:
        ensure_mfa(guard, ActionKind.SCALE_SERVICE, code, service.key, params)
    result = ops.scale(service, replicas)
    out.write(wrap(result.message) + "\n")
    if service.hpa is not None:
        hpa = service.hpa
        out.write(wrap(f"note: HorizontalPodAutoscaler {hpa.name} targets it (min {hpa.min_replicas or 1}, "
                       f"max {hpa.max_replicas}) and may change its replicas again") + "\n")
