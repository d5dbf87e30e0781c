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

from gpuconsole.cli.inert_output import inert_streams, plain_streams
from gpuconsole.cli.parser import (
    COMMANDS,
    DEFAULTS,
    EPILOG,
    ArgumentError,
    _names_no_command,  # noqa: F401 - re-exported: the first-frame test reads it here
    build_parser,
    parse_args,
)

__all__ = [
    "COMMANDS",
    "DEFAULTS",
    "EPILOG",
    "ArgumentError",
    "build_parser",
    "full_console",
    "main",
    "make_console",
    "parse_args",
    "run_console",
]


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


def make_console(args: argparse.Namespace, *, background_store: bool = False, act_on_budgets: bool = True,  # noqa: ANN201 - Console
                 automation: bool = False):
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
    from gpuconsole.core.config import ConfigError
    from gpuconsole.core.fleet.prometheus_config import serving_figures
    from gpuconsole.core.serving.config import load as load_serving

    try:
        serving = serving_figures(load_serving(args.config), prometheus) if not args.demo else None
    except ConfigError as exc:
        raise ArgumentError(str(exc)) from None
    from gpuconsole.core.fleet.cloud_config import alibaba_settings, azure_settings

    try:
        alibaba = alibaba_settings(args.config)
        azure = azure_settings(args.config)
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None

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
        watch_jobs=args.command in (None, "metrics"),  # other commands read once: a list, no watch threads
        prometheus=prometheus,
        alibaba=alibaba,
        azure=azure,
        serving=serving,
    )
    options = ConsoleOptions(sources=sources, db_path=args.db, no_db=args.no_db, interval=args.interval, config_path=args.config, cost_explorer_calls=args.billing_calls,
                             act_on_budgets=act_on_budgets, read_only=args.read_only, automation=automation,
                             **_demo_clock(args))
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
    """Run one command (the full-screen console when none), its output inert."""
    with inert_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = parse_args(argv)
        if args.command == "cost":
            from gpuconsole.cli.cost import run_cost

            if args.cost_command in ("reconcile", "clouds"):
                _setup_logging(tui=False)
            return run_cost(args, make_console=make_console)
        if args.command in ("users", "audit", "instance", "job", "service", "process", "access", "keys"):
            from gpuconsole.cli.access_parsers import run_access_command

            _setup_logging(tui=False)
            return run_access_command(args, make_console)
        if args.command in ("autopilot", "rule"):
            from gpuconsole.cli.autopilot import run_autopilot

            _setup_logging(tui=False)
            return run_autopilot(args, lambda a: make_console(a, act_on_budgets=False,
                                                              automation=getattr(a, "autopilot_command", "") == "run"))
        if args.command == "experiment":
            from gpuconsole.cli.experiment import run_experiment

            _setup_logging(tui=False)
            return run_experiment(args, make_console)
        if args.command == "notify":
            from gpuconsole.cli.notify import run_notify

            _setup_logging(tui=False)
            return run_notify(args, lambda a: make_console(a, act_on_budgets=False))
        if args.command == "metrics":
            from gpuconsole.cli.metrics import run_metrics

            _setup_logging(tui=False)
            return run_metrics(args, make_console)
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
        from gpuconsole.cli.table import width_of

        try:
            return run_snapshot(console, as_json=args.json, wait=args.wait, width=width_of(args))
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
    from gpuconsole.ui.collector import pace_collections

    _setup_logging(tui=True)
    app = GpuConsoleApp(build=lambda: full_console(args), theme_name=args.theme, gpu_thresholds=thresholds)
    try:
        with plain_streams(), pace_collections(app).beside():
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
