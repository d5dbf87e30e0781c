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
from gpuconsole.cli.table import WIDTH, Column, add_wide_option, render_table, width_of, wrap

VERBS = ("run", "list", "show", "stop")
LIST_COLUMNS = (Column("NAME", key=True), Column("STATE"), Column("RESULTS", right=True), Column("RUNNING", right=True),
                Column("PENDING", right=True), Column("SPENT", right=True))


def add_experiment_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    exp = sub.add_parser("experiment", parents=[common], help="compare instance types on one workload",
                         description="Run a workload on several instance types and markets, and compare cost per result.")
    verbs = exp.add_subparsers(dest="experiment_command", metavar="ACTION", parser_class=type(exp), required=True)
    run = verbs.add_parser("run", parents=[common], help="run an experiment file (TOML) to its end")
    run.add_argument("file", metavar="FILE")
    run.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON")
    add_wide_option(run)
    listing = verbs.add_parser("list", parents=[common], help="every experiment with its progress")
    listing.add_argument("--json", dest="as_json", action="store_true", help="print JSON ([] when there is none)")
    add_wide_option(listing)
    show = verbs.add_parser("show", parents=[common], help="the arms table of one experiment")
    show.add_argument("name", metavar="NAME")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--json", dest="as_json", action="store_true", help="print JSON")
    form.add_argument("--csv", dest="as_csv", action="store_true", help="print the arms as CSV")
    add_wide_option(show)
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
            return _list(book, out, as_json=args.as_json, width=width_of(args))
        if verb == "show":
            analysis = book.analysis(args.name)
            if args.as_json:
                json.dump(analysis_json(analysis, book.progress(args.name)), out, indent=2)
                out.write("\n")
            elif args.as_csv:
                write_csv(analysis, out)
            else:
                out.write(table(analysis, book.progress(args.name), width_of(args)))
            return 0
        problems = book.stop(args.name)
        if problems:
            raise CommandFailed(f"stopped {args.name}, but: {problems[0]}")
        out.write(wrap(f"stopped {args.name}") + "\n")
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
        out.write(table(analysis, progress, width_of(args)))
    if complete(analysis):
        return 0
    failed = [a.arm.title for a in analysis.arms if a.runs < spec.repeats]
    why = progress.message or f"{', '.join(failed)} did not get all {spec.repeats} results"
    print(f"gpuconsole: error: {why}", file=sys.stderr)
    return 1


def _list(book: Any, out: TextIO, *, as_json: bool = False, width: int | None = WIDTH) -> int:
    rows = book.rows()
    if as_json:  # a figure nobody knows (no price yet) is null, never 0
        listed = [book.progress(row.name) for row in rows]
        json.dump([{"name": p.name, "state": p.state, "planned": p.planned, "done": p.done, "running": p.running,
                    "pending": p.pending, "lost": p.lost, "spent": None if math.isnan(p.spent) else p.spent,
                    "max_cost": p.max_cost} for p in listed], out, indent=2)
        out.write("\n")
        return 0
    if not rows:
        out.write("no experiments (run one with: gpuconsole experiment run FILE)\n")
        return 0
    listed = [book.progress(row.name) for row in rows]
    cells = [(p.name, p.state, f"{p.done}/{p.planned}", p.running, p.pending, money(p.spent)) for p in listed]
    for line in render_table(LIST_COLUMNS, cells, width):
        out.write(line + "\n")
    return 0


# ---------------------------------------------------------------------------- output


def money(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3f}"


def _num(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def table(analysis: Any, progress: Any, width: int | None = WIDTH) -> str:
    """The arms table, then who wins, as ``experiment run`` and ``show`` print it. To fit
    ``width``, the confidence intervals go first, then the on-demand and spot prices."""
    spec = analysis.spec
    per = spec.work.per if spec.work.per and len(spec.work.per) <= 8 else "run"
    budget = f" of max {money(spec.max_cost)}" if spec.max_cost is not None else ""
    lines = [wrap(f"{spec.name}: {progress.state}, {progress.done}/{progress.planned} results, "
                  f"{money(analysis.spent)} spent{budget}; metric {spec.metric.unit} ({spec.metric.better} is better); "
                  f"work per run: {spec.work.amount:,.0f} {spec.work.unit}", width)]
    columns = (Column("ARM", key=True), Column("RUNS", right=True), Column("FAIL", right=True),
               Column("MEDIAN", right=True), Column("95% CI", right=True, give=5, drop=True),
               Column("TIME/" + per, right=True), Column("$/" + per, right=True),
               Column(f"$/{per} 95% CI", right=True, give=6, drop=True), Column("ON-DEM", right=True, give=4, drop=True),
               Column("SPOT", right=True, give=3, drop=True), Column("×FAST", right=True), Column("×CHEAP", right=True))
    rows = [(a.arm.title, a.runs, a.failed, _num(a.median),
             f"{_num(a.median_ci[0])}–{_num(a.median_ci[1])}" if a.has_results else "-",
             duration(a.seconds_per_work), money(a.cost_per_work),
             f"{money(a.cost_ci[0])}–{money(a.cost_ci[1])}" if a.has_results else "-",
             money(a.on_demand_per_work), money(a.spot_per_work), _num(a.to_fastest, 2), _num(a.to_cheapest, 2))
            for a in analysis.arms]
    lines += render_table(columns, rows, width)
    lines += [wrap(f"winner on {v.line()}", width) for v in analysis.verdicts]
    lines.append(wrap(f"prices: {analysis.price_source}", width))
    if progress.message:
        lines.append(wrap(progress.message, width))
    return "\n".join(lines) + "\n"


def duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
