"""``gpuconsole experiment``: run one workload on several instance types and compare cost per result.

``run FILE`` submits the experiment's Jobs through the console's job path (role, namespace and
audit as ``job submit``), follows them to the end and prints the arms table; it exits 0 when
every arm has all its results, 1 when an arm failed (or ``max_cost`` stopped it first) and 2 for
a bad file, before anything is submitted. ``list``, ``show`` and ``stop`` read and change what
the store recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, CommandFailed, finish

VERBS = ("run", "list", "show", "stop")


def add_experiment_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    exp = sub.add_parser("experiment", parents=[common], help="compare instance types on one workload",
                         description="Run a workload on several instance types and markets, and compare cost per result.")
    verbs = exp.add_subparsers(dest="experiment_command", metavar="ACTION", parser_class=type(exp), required=True)
    run = verbs.add_parser("run", parents=[common], help="run an experiment file (TOML) to its end")
    run.add_argument("file", metavar="FILE")
    run.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON")
    listing = verbs.add_parser("list", parents=[common], help="every experiment with its progress")
    listing.add_argument("--json", dest="as_json", action="store_true", help="print JSON ([] when there is none)")
    show = verbs.add_parser("show", parents=[common], help="the arms table of one experiment")
    show.add_argument("name", metavar="NAME")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--json", dest="as_json", action="store_true", help="print JSON")
    form.add_argument("--csv", dest="as_csv", action="store_true", help="print the arms as CSV")
    stop = verbs.add_parser("stop", parents=[common], help="stop an experiment and delete its live Jobs")
    stop.add_argument("name", metavar="NAME")


def run_experiment(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.fleet.experiment_door import experiment_book
    from gpuconsole.core.ops.experiments.export import analysis_json, write_csv
    from gpuconsole.core.ops.experiments.spec import SpecError, parse_file

    verb = args.experiment_command
    spec = None
    if verb == "run":
        try:
            spec = parse_file(args.file)
        except SpecError as exc:
            raise BadInput(f"{args.file}: {exc}") from None
    console = make_console(args)
    try:
        book = experiment_book(console)
        if verb == "run":
            return _run_file(book, spec, args, out)
        if verb == "list":
            return _list(book, out, as_json=args.as_json)
        if verb == "show":
            analysis = book.analysis(args.name)
            if args.as_json:
                json.dump(analysis_json(analysis, book.progress(args.name)), out, indent=2)
                out.write("\n")
            elif args.as_csv:
                write_csv(analysis, out)
            else:
                out.write(table(analysis, book.progress(args.name)))
            return 0
        problems = book.stop(args.name)
        if problems:
            raise CommandFailed(f"stopped {args.name}, but: {problems[0]}")
        out.write(f"stopped {args.name}\n")
        return 0
    finally:
        console.close()


def _run_file(book: Any, spec: Any, args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.ops.experiments.export import analysis_json
    from gpuconsole.core.ops.experiments.runner import complete

    with open(args.file, encoding="utf-8") as handle:
        source = handle.read()
    runner = book.start(spec, source)
    print(f"gpuconsole: running {spec.name}: {len(spec.arms)} arms × {spec.repeats} repeats", file=sys.stderr)
    analysis = runner.run(sleep=book.sleep, interval=book.interval)
    progress = book.progress(spec.name)
    if args.as_json:
        json.dump(analysis_json(analysis, progress), out, indent=2)
        out.write("\n")
    else:
        out.write(table(analysis, progress))
    if complete(analysis):
        return 0
    failed = [a.arm.title for a in analysis.arms if a.runs < spec.repeats]
    why = progress.message or f"{', '.join(failed)} did not get all {spec.repeats} results"
    print(f"gpuconsole: error: {why}", file=sys.stderr)
    return 1


def _list(book: Any, out: TextIO, *, as_json: bool = False) -> int:
    rows = book.rows()
    if as_json:  # a figure nobody knows (no price yet) is null, never 0
        listed = [book.progress(row.name) for row in rows]
        json.dump([{"name": p.name, "state": p.state, "planned": p.planned, "done": p.done, "running": p.running,
                    "pending": p.pending, "lost": p.lost, "spent": None if math.isnan(p.spent) else p.spent,
                    "max_cost": p.max_cost} for p in listed], out, indent=2)
        out.write("\n")
        return 0
    if not rows:
        out.write("no experiments yet: gpuconsole experiment run FILE\n")
        return 0
    out.write(f"{'NAME':<24} {'STATE':<8} {'RESULTS':>8} {'RUNNING':>7} {'PENDING':>7} {'SPENT':>9}\n")
    for row in rows:
        p = book.progress(row.name)
        out.write(f"{p.name:<24} {p.state:<8} {f'{p.done}/{p.planned}':>8} {p.running:>7} {p.pending:>7} "
                  f"{money(p.spent):>9}\n")
    return 0


# ---------------------------------------------------------------------------- output


def money(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3f}"


def _num(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def table(analysis: Any, progress: Any) -> str:
    """The arms table, then who wins, as ``experiment run`` and ``show`` print it."""
    spec = analysis.spec
    per = spec.work.per if spec.work.per and len(spec.work.per) <= 8 else "run"
    budget = f" of max {money(spec.max_cost)}" if spec.max_cost is not None else ""
    lines = [f"{spec.name}: {progress.state}, {progress.done}/{progress.planned} results, "
             f"{money(analysis.spent)} spent{budget}; metric {spec.metric.unit} ({spec.metric.better} is better), "
             f"work per run: {spec.work.amount:,.0f} {spec.work.unit}"]
    head = (f"{'ARM':<24} {'RUNS':>4} {'FAIL':>4} {'MEDIAN':>9} {'95% CI':>19} {'TIME/' + per:>12} "
            f"{'$/' + per + ' (CI)':>24} {'ON-DEM':>8} {'SPOT':>8} {'×FAST':>6} {'×CHEAP':>6}")
    lines.append(head)
    for a in analysis.arms:
        ci = f"{_num(a.median_ci[0])}–{_num(a.median_ci[1])}" if a.has_results else "-"
        cost = f"{money(a.cost_per_work)} ({money(a.cost_ci[0])}–{money(a.cost_ci[1])})" if a.has_results else "-"
        lines.append(
            f"{a.arm.title:<24} {a.runs:>4} {a.failed:>4} {_num(a.median):>9} {ci:>19} "
            f"{duration(a.seconds_per_work):>12} {cost:>24} {money(a.on_demand_per_work):>8} "
            f"{money(a.spot_per_work):>8} {_num(a.to_fastest, 2):>6} {_num(a.to_cheapest, 2):>6}")
    lines += [f"winner on {v.line()}" for v in analysis.verdicts]
    lines.append(f"prices: {analysis.price_source}")
    if progress.message:
        lines.append(progress.message)
    return "\n".join(lines) + "\n"


def duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
