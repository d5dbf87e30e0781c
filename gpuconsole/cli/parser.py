"""The command line's parser: the shared flags, their value types and the subcommands' parsers.

Every bad flag or value raises :class:`ArgumentError` with a one-line message.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from gpuconsole import __version__
from gpuconsole.cli.gpus import add_threshold_options
from gpuconsole.cli.table import WIDTH, add_wide_option
from gpuconsole.core.fleet.source_names import (
    GPU_SOURCES,
    JOB_SOURCES,
    check_cloud,
    check_region,
)

KEYS = """\
keys in the console:
  1-9 / tab   switch panes: overview, GPUs, jobs, instances, budgets, audit,
              autopilot, experiments, services
  /           filter the current table        enter  details of the selected row
  ctrl+p      command palette (every action)  ?      all key bindings
  d           open the demo (with no backend)  q      quit
"""

EXAMPLES = (
    ("gpuconsole --demo", "the console on a simulated GPU cloud"),
    ("gpuconsole --demo --demo-nodes 139", "a simulated fleet of about 1,000 GPUs"),
    ("gpuconsole snapshot --demo --json", "the same state as JSON, for scripts"),
    ("gpuconsole gpus --once --json", "this host's GPUs, MIG slices, processes"),
    ("gpuconsole budget add pause-at-1000 --amount 1000 \\\n"
     "    --threshold 100:notify+stop-all+terminate-spot --automatic",
     "alert, and stop instances at $1,000 spent from now on"),
    ("gpuconsole budget check --enforce", "cron: exit 1 past a threshold, and act"),
    ("gpuconsole cost compare --preset resnet50", "own server vs cloud on-demand vs spot, priced"),
    ("gpuconsole experiment run exp.toml", "one workload on several types: $ per epoch"),
    ("gpuconsole --region us-east-1 --region us-west-2", "GPU instances of two AWS regions"),
    ("gpuconsole --context prod --namespace ml", "the job queue of one namespace of a kubeconfig context"),
    ("gpuconsole --prometheus https://prom.example.com \\\n    --prometheus-token-file ~/.prom-token",
     "every GPU of the fleet from the DCGM exporter's series"),
    ("gpuconsole service list --demo", "inference services: latency, tok/s, $ per 1M tokens"),
    ("gpuconsole users init", "become the first admin and enrol MFA"),
    ("gpuconsole audit verify", "exit 1 when the audit log was tampered"),
    ("gpuconsole --read-only", "the console with every change disabled"),
    ("gpuconsole autopilot plan", "what each autopilot rule would do, and why"),
    ("gpuconsole access whoami", "as whom: role, IAM role, RBAC, MFA, TLS"),
    ("gpuconsole budget list --wide", f"tables whole, wider than {WIDTH} columns"),
)

ENVIRONMENT = (
    ("GPUCONSOLE_DB", "cache database path (default: the user cache directory)"),
    ("GPUCONSOLE_CONFIG", "configuration file: [[budgets]], [[rules]], [[notify]], [aws.roles], [audit], [tls] "
                          "(default: "
                          "the user config directory; the [access], [audit] and [aws.roles] of "
                          "/etc/gpuconsole/config.toml bind every login)"),
    ("GPUCONSOLE_USERS, GPUCONSOLE_MFA, GPUCONSOLE_AUDIT_DB", "users table, MFA secrets, audit log (refused "
                                                              "for a non-root login where /etc/gpuconsole sets them)"),
    ("GPUCONSOLE_AUTOPILOT_DB", "the autopilot's state: cooldowns, pauses, rules added with rule add"),
    ("GPUCONSOLE_NOTIFY_DB", "the alerts sent and each channel's queue (notify run, autopilot run)"),
    ("GPUCONSOLE_MFA_CODE", "the MFA code for a command that needs one"),
    ("AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL ...", "the standard AWS settings are honoured"),
    ("KUBECONFIG", "kubeconfig file(s), ':'-separated (default ~/.kube/config)"),
    ("GPUCONSOLE_PROMETHEUS_TOKEN, GPUCONSOLE_PROMETHEUS_PASSWORD", "Prometheus credentials"),
    ("NO_COLOR", "disable colour"),
)


def two_columns(rows: Sequence[tuple[str, str]], at: int) -> str:
    """``rows`` as an indented list: each left text, and its words from column ``at`` on,
    wrapped to :data:`WIDTH` (under a left text too long to share its first line)."""
    import textwrap

    lines = []
    for left, right in rows:
        words = textwrap.wrap(right, WIDTH - at, break_on_hyphens=False)
        lefts = [f"  {part}" for part in left.split("\n")]
        if len(lefts[-1]) + 2 > at:
            lines += lefts
        else:
            lines += lefts[:-1]
            lines.append(lefts[-1].ljust(at) + words.pop(0))
        lines += [" " * at + more for more in words]
    return "\n".join(lines) + "\n"


EPILOG = (KEYS + "\nexamples:\n" + two_columns(EXAMPLES, 38) + "\nenvironment:\n" + two_columns(ENVIRONMENT, 24))


class ArgumentError(Exception):
    """A bad command line; the message is one line."""


class FittedHelp(argparse.HelpFormatter):
    """argparse's help in :data:`WIDTH` columns at most, however wide the terminal is."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("width") is None:
            kwargs["width"] = min(shutil.get_terminal_size().columns, WIDTH) - 2
        super().__init__(prog, *args, **kwargs)


class FittedRawHelp(FittedHelp, argparse.RawDescriptionHelpFormatter):
    """Help whose description and epilog keep their indented lines (tables, formulas, examples)
    as written, and fill the others to the width."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "".join(indent + line if line[:1].isspace() or len(indent + line.rstrip("\n")) <= width else
                       textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent,
                                     break_on_hyphens=False) + "\n"
                       for line in text.splitlines(keepends=True))


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit with status 2, and the help
    fits :data:`WIDTH` columns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raw = kwargs.get("formatter_class") is argparse.RawDescriptionHelpFormatter
        kwargs["formatter_class"] = FittedRawHelp if raw else kwargs.get("formatter_class", FittedHelp)
        super().__init__(*args, **kwargs)

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


def _cloud(text: str) -> str:
    try:
        return check_cloud(text)
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
    cloud.add_argument("--cloud", type=_cloud, default=argparse.SUPPRESS, metavar="auto|aws|alibaba|azure|off|LIST", help="cloud instances source, or several as a list (aws,alibaba); default auto: every cloud set up (AWS credentials or a region, an [alibaba] table with regions, an [azure] table with a subscription)")
    cloud.add_argument("--region", dest="regions", action="append", type=_region, default=argparse.SUPPRESS, metavar="R", help="AWS region to watch and launch in; repeat for several (default: the profile's region)")
    cloud.add_argument("--profile", default=argparse.SUPPRESS, metavar="NAME", help="AWS profile from ~/.aws/config (default $AWS_PROFILE)")
    cloud.add_argument("--billing-calls", type=_non_negative_int, default=argparse.SUPPRESS, metavar="N", help="Cost Explorer requests a day at most, for the billed spend shown beside the estimate (each costs $0.01; default 4, 0 turns it off)")
    cloud.add_argument("--all-instance-types", action="store_true", default=argparse.SUPPRESS, help="list every instance, not only GPU instance types")
    group.add_argument("--interval", type=_positive_float, default=argparse.SUPPRESS, metavar="S", help="seconds between polls (default 1)")
    group.add_argument("--db", type=Path, default=argparse.SUPPRESS, metavar="PATH", help="cache database (default $GPUCONSOLE_DB or the user cache dir)")
    group.add_argument("--no-db", action="store_true", default=argparse.SUPPRESS, help="keep no cache and no history on disk")
    group.add_argument("--config", type=Path, default=argparse.SUPPRESS, metavar="PATH", help="configuration file with [[budgets]], [[rules]], [[notify]] (default $GPUCONSOLE_CONFIG or config.toml in the user config dir)")
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
COMMANDS = ("snapshot", "budget", "cost", "gpus", "sim-exporter", "metrics", "users", "audit", "instance", "job",
            "service", "process", "access", "keys", "autopilot", "rule", "experiment", "notify")


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
        description="A keyboard-first console for GPU workloads: GPUs, job queues, cloud instances and budgets "
                    "on one screen.",
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
    snap.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON (sections gpus, jobs, instances, services, budgets, sources)")
    snap.add_argument("--wait", type=_positive_float, default=5.0, metavar="S", help="seconds to wait for every source's first answer (default 5)")
    add_wide_option(snap)
    from gpuconsole.cli.budget import add_budget_parser

    add_budget_parser(sub, common, _positive_float)
    from gpuconsole.cli.cost import add_cost_parser

    add_cost_parser(sub, common)
    from gpuconsole.cli.gpus import add_gpus_parser

    add_gpus_parser(sub, common, _positive_float)

    from gpuconsole.cli.exporter import add_exporter_parser

    add_exporter_parser(sub, _port, _non_negative_int, _demo_nodes)
    from gpuconsole.cli.metrics import add_metrics_parser

    add_metrics_parser(sub, common, _port)

    from gpuconsole.cli.access_parsers import add_access_parsers

    add_access_parsers(sub, common)
    from gpuconsole.cli.autopilot import add_autopilot_parser

    add_autopilot_parser(sub, common)
    from gpuconsole.cli.experiment import add_experiment_parser

    add_experiment_parser(sub, common)
    from gpuconsole.cli.notify import add_notify_parser

    add_notify_parser(sub, common)
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
