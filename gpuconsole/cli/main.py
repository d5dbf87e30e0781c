"""Command line: ``gpuconsole`` opens the console; subcommands serve scripts.

Every bad flag or value ends in one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from gpuconsole import __version__
from gpuconsole.cli.gpus import add_threshold_options
from gpuconsole.core.fleet.source_names import (
    CLOUD_SOURCES,
    GPU_SOURCES,
    JOB_SOURCES,
    check_region,
)

EPILOG = """\
keys in the console:
  1-8 / tab   switch panes (overview, GPUs, jobs, instances, budgets, audit, autopilot, experiments)
  /           filter the current table        enter  details of the selected row
  ctrl+p      command palette (every action)  ?      all key bindings
  d           open the demo (when no backend is configured)      q  quit

examples:
  gpuconsole --demo                        the console on a simulated GPU cloud
  gpuconsole --demo --demo-nodes 139       a simulated fleet of about 1,000 GPUs
  gpuconsole snapshot --demo --json        the same state as JSON, for scripts
  gpuconsole gpus --once --json            this host's GPUs, MIG slices and processes once (NVML)
  gpuconsole budget add pause-at-1000 --amount 1000 --threshold 100:notify+stop-all+terminate-spot --automatic
                                           alert, and stop instances at $1,000 spent from now on
  gpuconsole budget check --enforce        for cron: exit 1 past a threshold, run automatic actions
  gpuconsole cost compare --preset resnet50   own server vs cloud on-demand vs spot, priced
  gpuconsole experiment run exp.toml       one workload on several instance types: $ per epoch
  gpuconsole --region us-east-1 --region us-west-2   GPU instances of two AWS regions
  gpuconsole --context prod --namespace ml   the job queue of one namespace of a kubeconfig context
  gpuconsole --prometheus https://prom.example.com --prometheus-token-file ~/.prom-token
                                           every GPU of the fleet from the DCGM exporter's series
  gpuconsole users init                    become the first admin and enrol MFA (roles: users --help)
  gpuconsole audit verify                  check the audit log's hash chain (exit 1 when tampered)
  gpuconsole --read-only                   the console with every change disabled
  gpuconsole autopilot plan                what every autopilot rule would do now, and why
  gpuconsole access whoami                 who gpuconsole acts as: role, IAM role, RBAC, MFA, TLS

environment:
  GPUCONSOLE_DB   cache database path (default: the user cache directory)
  GPUCONSOLE_CONFIG   configuration file: [[budgets]], [[rules]], [aws.roles], [audit], [tls]
                      (default: the user config directory; the [access], [audit] and [aws.roles]
                      of /etc/gpuconsole/config.toml bind every login)
  GPUCONSOLE_USERS, GPUCONSOLE_MFA, GPUCONSOLE_AUDIT_DB   users table, MFA secrets, audit log
                      (refused for a non-root login where /etc/gpuconsole sets them)
  GPUCONSOLE_AUTOPILOT_DB   the autopilot's state: cooldowns, pauses, rules added with rule add
  GPUCONSOLE_MFA_CODE   the MFA code for a command that needs one
  AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL ...   the standard AWS settings are honoured
  KUBECONFIG      kubeconfig file(s), ':'-separated (default ~/.kube/config)
  GPUCONSOLE_PROMETHEUS_TOKEN, GPUCONSOLE_PROMETHEUS_PASSWORD   Prometheus credentials
  NO_COLOR        disable colour
"""


class ArgumentError(Exception):
    """A bad command line; the message is one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit with status 2."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentError(message)


def _whole_number(text: str, low: int, high: int | None = None, unit: str = "") -> int:
    """``text`` as a whole number from ``low`` (to ``high``); one rule and one message for
    every value outside the range, below it or above it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low or (high is not None and value > high):
        bounds = f"{low} or more" if high is None else f"from {low} to {high:,}" if high >= 100_000 else f"from {low} to {high}"
        raise argparse.ArgumentTypeError(f"must be {bounds}{unit}, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    return _whole_number(text, 0)


MAX_DEMO_NODES = 4096  # 32,768 GPUs: far beyond any fleet the console is measured on


def _demo_nodes(text: str) -> int:
    return _whole_number(text, 1, MAX_DEMO_NODES, " nodes")


MAX_DEMO_JOBS = 1_000_000  # history beyond this only fills memory


def _demo_jobs(text: str) -> int:
    return _whole_number(text, 0, MAX_DEMO_JOBS, " jobs")


MAX_PORT = 65535


def _port(text: str) -> int:
    """A TCP port to listen on: 1 to 65535, or 0 for any free port."""
    return _whole_number(text, 0, MAX_PORT)


MAX_SECONDS = 86400.0


def _moment(text: str) -> float:
    """A UTC time, ISO 8601 (``2026-11-16T14:00Z``) or POSIX seconds."""
    from datetime import UTC, datetime

    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (e.g. 2026-11-16T14:00Z)") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    if not math.isfinite(value) or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SECONDS:.0f} s, got {text}")
    return value


def _region(text: str) -> str:
    try:
        return check_region(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common_options() -> _Parser:
    common = _Parser(add_help=False)
    group = common.add_argument_group("data sources")
    group.add_argument("--demo", action="store_true", default=argparse.SUPPRESS, help="run on a simulated GPU cloud")
    group.add_argument("--seed", type=_non_negative_int, default=argparse.SUPPRESS, metavar="N", help="seed of the simulated world (default 7)")
    group.add_argument("--demo-nodes", type=_demo_nodes, default=argparse.SUPPRESS, metavar="N", help="simulate N nodes of up to 8 GPUs instead of the default fleet")
    group.add_argument("--demo-jobs", type=_demo_jobs, default=argparse.SUPPRESS, metavar="N",
                       help="list about N jobs: the live ones plus finished and queued history that never changes")
    group.add_argument("--demo-at", type=_moment, default=argparse.SUPPRESS, metavar="TIME",
                       help="start the simulated world at this UTC time (ISO 8601), so every run shows the same world")
    group.add_argument("--demo-faults", default=argparse.SUPPRESS, metavar="SPEC", help="inject faults, e.g. gpus:error,jobs:hang,cloud:slow=3 (modes: error, hang, slow[=S], flaky)")
    group.add_argument("--gpus", choices=GPU_SOURCES, default=argparse.SUPPRESS, help="GPU telemetry source (default auto)")
    kube = common.add_argument_group("Kubernetes (the kubeconfig, as kubectl finds it)")
    kube.add_argument("--jobs", choices=JOB_SOURCES, default=argparse.SUPPRESS, help="job queue source (default auto: Kubernetes when a kubeconfig or an in-cluster account is found)")
    kube.add_argument("--kubeconfig", default=argparse.SUPPRESS, metavar="PATH", help="kubeconfig file(s), ':'-separated (default $KUBECONFIG or ~/.kube/config)")
    kube.add_argument("--context", default=argparse.SUPPRESS, metavar="NAME", help="kubeconfig context (default its current context)")
    kube.add_argument("--namespace", dest="namespaces", action="append", default=argparse.SUPPRESS, metavar="NS", help="namespace to watch; repeat for several (default: all namespaces)")
    kube.add_argument("--all-namespaces", dest="namespaces", action="store_const", const=[], default=argparse.SUPPRESS, help="watch every namespace (the default)")
    prom = common.add_argument_group("fleet GPU telemetry (Prometheus with the DCGM exporter)")
    prom.add_argument("--prometheus", dest="prometheus_url", default=argparse.SUPPRESS, metavar="URL", help="read every GPU of the fleet from this Prometheus (default: the config file's [prometheus] url)")
    prom.add_argument("--prometheus-token-file", default=argparse.SUPPRESS, metavar="FILE", help="bearer token for Prometheus (or $GPUCONSOLE_PROMETHEUS_TOKEN)")
    prom.add_argument("--prometheus-user", default=argparse.SUPPRESS, metavar="NAME", help="basic-auth user; the password from --prometheus-password-file or $GPUCONSOLE_PROMETHEUS_PASSWORD")
    prom.add_argument("--prometheus-password-file", default=argparse.SUPPRESS, metavar="FILE", help="basic-auth password file")
    prom.add_argument("--prometheus-ca", default=argparse.SUPPRESS, metavar="FILE", help="CA bundle to verify Prometheus with (TLS is always verified)")
    prom.add_argument("--prometheus-gzip", dest="prometheus_compress", action="store_true", default=argparse.SUPPRESS, help="ask Prometheus for gzip answers: 3-4 times fewer bytes over a slow link, for some CPU")
    cloud = common.add_argument_group("cloud (AWS: the standard credential chain, as the aws CLI uses)")
    cloud.add_argument("--cloud", choices=CLOUD_SOURCES, default=argparse.SUPPRESS, help="cloud instances source (default auto: AWS when credentials or a region are configured)")
    cloud.add_argument("--region", dest="regions", action="append", type=_region, default=argparse.SUPPRESS, metavar="R", help="AWS region to watch and launch in; repeat for several (default: the profile's region)")
    cloud.add_argument("--profile", default=argparse.SUPPRESS, metavar="NAME", help="AWS profile from ~/.aws/config (default $AWS_PROFILE)")
    cloud.add_argument("--billing-calls", type=_non_negative_int, default=argparse.SUPPRESS, metavar="N", help="Cost Explorer requests a day at most, for the billed spend shown beside the estimate (each costs $0.01; default 4, 0 turns it off)")
    cloud.add_argument("--all-instance-types", action="store_true", default=argparse.SUPPRESS, help="list every instance, not only GPU instance types")
    group.add_argument("--interval", type=_positive_float, default=argparse.SUPPRESS, metavar="S", help="seconds between polls (default 1)")
    group.add_argument("--db", type=Path, default=argparse.SUPPRESS, metavar="PATH", help="cache database (default $GPUCONSOLE_DB or the user cache dir)")
    group.add_argument("--no-db", action="store_true", default=argparse.SUPPRESS, help="keep no cache and no history on disk")
    group.add_argument("--config", type=Path, default=argparse.SUPPRESS, metavar="PATH", help="configuration file with [[budgets]] (default $GPUCONSOLE_CONFIG or config.toml in the user config dir)")
    group.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS, help="change nothing: every action is denied, to everyone")
    return common


DEFAULTS = {
    "demo": False,
    "seed": 7,
    "demo_nodes": None,
    "demo_jobs": None,
    "demo_faults": None,
    "demo_at": None,
    "gpus": "auto",
    "cloud": "auto",
    "regions": (),
    "profile": None,
    "all_instance_types": False,
    "jobs": "auto",
    "kubeconfig": None,
    "context": None,
    "namespaces": (),
    "billing_calls": 4,
    "interval": 1.0,
    "db": None,
    "no_db": False,
    "theme": None,
    "json": False,
    "config": None,
    "prometheus_url": None,
    "prometheus_token_file": None,
    "prometheus_user": None,
    "prometheus_password_file": None,
    "prometheus_ca": None,
    "prometheus_compress": None,
    "read_only": False,
}


# The commands, in the order ``gpuconsole --help`` lists them (a test holds this to the parser).
COMMANDS = ("snapshot", "budget", "cost", "gpus", "sim-exporter", "users", "audit", "instance", "job", "process",
            "access", "keys", "autopilot", "rule", "experiment")


def _names_no_command(argv: Sequence[str]) -> bool:
    """Whether ``argv`` can hold no command and asks for no help: then the commands' own flags
    are never read, and the parser needs only their names (the full console starts sooner)."""
    for word in argv:
        if word in COMMANDS or word.startswith("--h") or (word.startswith("-") and not word.startswith("--") and "h" in word):
            return False
    return True


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the ``argv`` it will read, one that leaves out what that
    line cannot reach (see :func:`_names_no_command`), with the same answer for it."""
    common = _common_options()
    parser = _Parser(
        prog="gpuconsole",
        description="A keyboard-first console for GPU workloads: GPUs, job queues, cloud instances and budgets on one screen.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"gpuconsole {__version__}")
    parser.add_argument("--theme", default=argparse.SUPPRESS, metavar="NAME", help="colour theme: dark, light or contrast (ANSI-safe)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    add_threshold_options(parser)
    if argv is not None and _names_no_command(argv):
        for name in COMMANDS:
            sub.add_parser(name)
        return parser
    snap = sub.add_parser(
        "snapshot",
        parents=[common],
        help="print the current state once and exit (for scripts)",
        description="Print GPUs, jobs, instances, budgets and source status once, as text or JSON.",
    )
    snap.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON (sections gpus, jobs, instances, budgets, sources)")
    snap.add_argument("--wait", type=_positive_float, default=5.0, metavar="S", help="seconds to wait for every source's first answer (default 5)")
    from gpuconsole.cli.budget import add_budget_parser

    add_budget_parser(sub, common, _positive_float)
    from gpuconsole.cli.cost import add_cost_parser

    add_cost_parser(sub, common)
    from gpuconsole.cli.gpus import add_gpus_parser

    add_gpus_parser(sub, common, _positive_float)

    from gpuconsole.cli.exporter import add_exporter_parser

    add_exporter_parser(sub, _port, _non_negative_int, _demo_nodes)

    from gpuconsole.cli.access_parsers import add_access_parsers

    add_access_parsers(sub, common)
    from gpuconsole.cli.autopilot import add_autopilot_parser

    add_autopilot_parser(sub, common)
    from gpuconsole.cli.experiment import add_experiment_parser

    add_experiment_parser(sub, common)
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    if argv is None:
        argv = sys.argv[1:]
    args = build_parser(argv).parse_args(argv)
    for key, value in DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, value)
    if args.demo_faults is not None:
        from gpuconsole.backends.sim import FaultPlan

        try:
            FaultPlan.parse(args.demo_faults)
        except ValueError as exc:
            raise ArgumentError(f"argument --demo-faults: {exc}") from None
    if args.theme is not None:
        from gpuconsole.ui.themes import theme_names

        if args.theme not in theme_names():
            raise ArgumentError(f"unknown theme {args.theme!r}: choose one of {', '.join(theme_names())}")
    return args


def _db_path(args: argparse.Namespace) -> Path | None:
    """The cache database path, checked to be writable; None with ``--no-db``."""
    if args.no_db:
        return None
    from gpuconsole.core.paths import StoreError, check_db_path, default_db_path

    path: Path = args.db if args.db is not None else default_db_path()
    try:
        check_db_path(path)
    except StoreError as exc:
        raise ArgumentError(str(exc)) from None
    return path


def _open_store(path: Path):  # noqa: ANN202 - Store, imported lazily (sqlite-utils is slow to import)
    from gpuconsole.core.fleet.store import Store, StoreError

    warnings: list[str] = []
    try:
        store = Store(path, on_warning=warnings.append)
    except StoreError as exc:
        raise ArgumentError(str(exc)) from None
    for warning in warnings:
        print(f"gpuconsole: warning: {warning}", file=sys.stderr)
    return store


def _demo_clock(args: argparse.Namespace) -> dict[str, object]:
    """With ``--demo-at``, a clock that starts there and runs at the wall clock's pace."""
    if args.demo_at is None:
        return {}
    import time

    origin, at = time.time(), math.floor(args.demo_at)
    return {"clock": lambda: at + (time.time() - origin)}


def make_console(args: argparse.Namespace, *, background_store: bool = False, act_on_budgets: bool = True):  # noqa: ANN201 - Console
    """The Console the flags ask for.

    With ``background_store`` (the full-screen console) the cache database is opened after the
    first frame, and a problem with it becomes an alert; otherwise it is opened now and a
    problem is a usage error.
    """
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.prometheus_config import resolve as prometheus_settings
    from gpuconsole.core.fleet.sources import SourceOptions

    flags = {"url": args.prometheus_url, "token_file": args.prometheus_token_file, "username": args.prometheus_user,
             "password_file": args.prometheus_password_file, "ca_file": args.prometheus_ca,
             "compress": args.prometheus_compress}
    try:
        prometheus = prometheus_settings(flags, args.config)
    except ValueError as exc:
        raise ArgumentError(f"Prometheus: {exc}") from None

    sources = SourceOptions(
        demo=args.demo,
        seed=args.seed,
        demo_nodes=args.demo_nodes,
        demo_jobs=args.demo_jobs,
        demo_faults=args.demo_faults,
        sim_start=math.floor(args.demo_at) if args.demo_at is not None else None,
        gpus=args.gpus,
        cloud=args.cloud,
        regions=tuple(dict.fromkeys(args.regions)),
        profile=args.profile,
        all_instance_types=args.all_instance_types,
        jobs=args.jobs,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=tuple(dict.fromkeys(args.namespaces)),
        watch_jobs=args.command is None,  # commands read once: a list, no watch threads
        prometheus=prometheus,
    )
    options = ConsoleOptions(sources=sources, db_path=args.db, no_db=args.no_db, interval=args.interval, config_path=args.config, cost_explorer_calls=args.billing_calls,
                             act_on_budgets=act_on_budgets, read_only=args.read_only, **_demo_clock(args))
    path = _db_path(args)
    if path is None:
        return Console(options)
    if background_store:

        def open_store():  # noqa: ANN202 - runs in the Console's background thread
            from gpuconsole.core.fleet.store import Store

            return Store(path)

        return Console(options, open_store=open_store)
    return Console(options, store=_open_store(path))


def _setup_logging(tui: bool) -> None:
    """Log to stderr for commands, to a file while the full-screen console owns the terminal."""
    level = os.environ.get("GPUCONSOLE_LOG", "WARNING").upper()
    if level not in logging.getLevelNamesMapping():
        level = "WARNING"
    if not tui:
        logging.basicConfig(level=level, stream=sys.stderr, format="gpuconsole: %(levelname)s: %(message)s")
        return
    try:
        from gpuconsole.core.paths import default_db_path, private_file

        path = private_file(default_db_path().parent / "gpuconsole.log")
        logging.basicConfig(level=level, filename=path, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    except OSError:
        logging.getLogger().addHandler(logging.NullHandler())


def _denials() -> tuple[type[BaseException], ...]:
    """What ends a command as a one-line denial (exit 1): site settings a login may not replace,
    a file it may not use. Imported only when an error is being matched."""
    from gpuconsole.core.access.access import AccessError

    return (AccessError, PermissionError)


def _denied(exc: BaseException) -> int:
    from gpuconsole.cli.access import permission_line

    line = permission_line(exc) if isinstance(exc, PermissionError) else str(exc)
    print(f"gpuconsole: error: {line}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        if args.command == "cost":
            from gpuconsole.cli.cost import run_cost

            if args.cost_command == "reconcile":
                _setup_logging(tui=False)
            return run_cost(args, make_console=make_console)
        if args.command in ("users", "audit", "instance", "job", "process", "access", "keys"):
            from gpuconsole.cli.access_parsers import run_access_command

            _setup_logging(tui=False)
            return run_access_command(args, make_console)
        if args.command in ("autopilot", "rule"):
            from gpuconsole.cli.autopilot import run_autopilot

            _setup_logging(tui=False)
            return run_autopilot(args, lambda a: make_console(a, act_on_budgets=False))
        if args.command == "experiment":
            from gpuconsole.cli.experiment import run_experiment

            _setup_logging(tui=False)
            return run_experiment(args, make_console)
        if args.command == "sim-exporter":
            from gpuconsole.cli.exporter import run_exporter

            return run_exporter(args)
        if args.command == "gpus":
            from gpuconsole.cli.gpus import run_gpus

            _setup_logging(tui=False)
            return run_gpus(args)
        from gpuconsole.cli.gpus import thresholds_from_args

        try:
            thresholds = thresholds_from_args(args)
        except ValueError as exc:
            raise ArgumentError(str(exc)) from None
        if args.command == "budget":
            from gpuconsole.cli.budget import run_budget

            _setup_logging(tui=False)
            def open_budget_store():  # noqa: ANN202 - Store | None, imported lazily
                path = _db_path(args)
                return None if path is None else _open_store(path)

            return run_budget(args, make_console=make_console, open_store=open_budget_store)
        if args.command is None:
            return run_console(args, thresholds)
        console = make_console(args, act_on_budgets=False)  # only the full-screen console acts on budgets
    except ArgumentError as exc:
        return _usage_error(exc)
    except _denials() as exc:
        return _denied(exc)
    _setup_logging(tui=False)
    if args.command == "snapshot":
        from gpuconsole.cli.snapshot import run_snapshot

        try:
            return run_snapshot(console, as_json=args.json, wait=args.wait)
        except BrokenPipeError:
            # The reader went away (``gpuconsole snapshot --json | head``): not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
    raise AssertionError(f"no handler for {args.command!r}")  # every command returned above


def run_console(args: argparse.Namespace, thresholds: tuple[tuple[float, float], tuple[float, float]]) -> int:
    """The full-screen console. Its frame is painted first; the Console (sources, the simulated
    world, the access files) is built behind it, and an error building it ends the app with the
    same one line a command gets."""
    _db_path(args)  # an unusable --db is one line before the screen is taken, not after
    from gpuconsole.ui.app import GpuConsoleApp

    _setup_logging(tui=True)
    app = GpuConsoleApp(build=lambda: full_console(args), theme_name=args.theme, gpu_thresholds=thresholds)
    try:
        app.run()
    finally:
        app.close_core()
    error = app.boot_error
    if error is None:
        return app.return_code or 0
    if isinstance(error, ArgumentError):
        return _usage_error(error)
    if isinstance(error, _denials()):
        return _denied(error)
    raise error


def full_console(args: argparse.Namespace):  # noqa: ANN201 - Console, imported lazily
    """The Console the full-screen console shows. Only it acts on budgets by itself (scripts use
    ``budget check --enforce``), and its cache database opens behind the first frame."""
    return make_console(args, background_store=True, act_on_budgets=True)


def _usage_error(exc: BaseException) -> int:
    print(f"gpuconsole: error: {exc} (see gpuconsole --help)", file=sys.stderr)
    return 2
