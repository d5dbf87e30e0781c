"""Every benchmark of this folder, one after another, and one table: figure | measured | target | met?

    .venv/bin/python benchmarks/run_all.py --quick     # short runs of each (about 8 minutes)
    .venv/bin/python benchmarks/run_all.py             # each script's own defaults (about 40 minutes)
    .venv/bin/python benchmarks/run_all.py --only jobs_scale --only costs

Each script runs in its own process with ``--json`` (and, with ``--quick``, short parameters);
its human table goes to this script's stderr as it comes, and the figures it prints as JSON make
the combined table. A script that fails is a row saying so; the others still run. The load
average before and after is printed under the table, since every figure here moves with it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Row:
    figure: str
    measured: str
    target: str = ""
    met: bool | None = None  # None: no target

    @property
    def verdict(self) -> str:
        return "" if self.met is None else ("yes" if self.met else "NO")


def at_most(figure: str, value: float | None, unit: str, target: float | None, fmt: str = "{:.0f}") -> Row:
    if value is None or math.isnan(value):  # not measured
        return Row(figure, "n/a", f"≤ {fmt.format(target)} {unit}" if target is not None else "")
    measured = f"{fmt.format(value)} {unit}"
    if target is None:
        return Row(figure, measured)
    return Row(figure, measured, f"≤ {fmt.format(target)} {unit}", value <= target)


# ---------------------------------------------------------------------- per script: rows from its JSON
def startup_rows(doc: dict[str, Any]) -> list[Row]:
    rows = []
    fleets = {key: f"{fleet['gpus']:,}" for key, fleet in doc.get("fleets", {}).items()}
    for key, fig in doc.get("first_complete_frame", {}).items():
        fleet, kind = key.split(":")
        target = 0.5 if fleet == "default" else None
        label = f"first complete frame ({kind.replace('_', ' ')}), {fleets.get(fleet, '?')} GPUs"
        rows.append(at_most(label, fig["median"], "s", target, "{:.2f}"))
    for section, where in (("idle_cpu_tmux", "tmux"), ("idle_cpu_headless", "headless")):
        for key, fig in doc.get(section, {}).items():
            fleet, _, size = key.partition(":")
            size = size or "80x24"  # the headless figures are keyed by fleet only
            target = 3.0 if fleet == "default" and where == "tmux" else None
            label = f"idle CPU at 1 Hz, {where} {size}, {fleets.get(fleet, '?')} GPUs"
            rows.append(at_most(label, fig["median"], "%", target, "{:.1f}"))
    return rows


def fleet_rows(doc: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for r in doc:
        name = f"{r['gpus']:,} GPUs"
        big, mid = r["fleet"] >= 8192, r["fleet"] == 1024
        rows.append(at_most(f"fleet refresh {name}: CPU", r["cpu_percent"], "%", 20.0 if big else 8.0 if mid else None, "{:.1f}"))
        rows.append(at_most(f"fleet refresh {name}: tick (median)", r["tick_median_ms"], "ms", 50.0 if mid else None))
        rows.append(at_most(f"fleet refresh {name}: key → screen (median)", r["key_ms"], "ms", 100.0 if big else None))
        rows.append(at_most(f"fleet refresh {name}: key → screen (worst)", r["key_max_ms"], "ms", None))
    return rows


def jobs_rows(doc: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for r in doc:
        size = r["size"]
        name = f"{r['jobs']:,} jobs"
        rows.append(at_most(f"jobs {name}: load + first render", r["load_s"], "s", 1.0 if size == 10_000 else None, "{:.2f}"))
        rows.append(at_most(f"jobs {name}: filter keystroke", r["key_ms"], "ms", 50.0 if size == 10_000 else None))
        rows.append(at_most(f"jobs {name}: re-order a new reading", r["reorder_ms"], "ms", None))
        rows.append(at_most(f"jobs {name}: tick on the Jobs pane (median)", r["tick_ms"], "ms", None))
        rows.append(at_most(f"jobs {name}: CPU at 1 Hz", r["cpu_percent"], "%", None, "{:.1f}"))
        rows.append(at_most(f"jobs {name}: peak RSS", r["rss_mb"], "MB", 300.0 if size == 100_000 else None))
    return rows


def kube_rows(doc: dict[str, Any]) -> list[Row]:
    name = f"kube {doc['jobs']:,} jobs"
    return [
        at_most(f"{name}: list + first render", doc["first"], "s", 2.0, "{:.2f}"),
        at_most(f"{name}: filter keystroke", doc["key"] * 1000, "ms", 100.0),
        at_most(f"{name}: filter keystroke (Pilot)", doc["pilot"] * 1000, "ms", None),
        at_most(f"{name}: peak RSS", doc["peak_rss_mb"], "MB", 250.0),
    ]


def instances_rows(doc: dict[str, Any]) -> list[Row]:
    name = f"instances {doc['instances']:,}"
    return [
        at_most(f"{name}: first render", doc["first_s"], "s", None, "{:.2f}"),
        at_most(f"{name}: tick, UI thread (median)", doc["tick_ms"], "ms", 50.0, "{:.1f}"),
        at_most(f"{name}: UI thread CPU at 1 Hz", doc["ui_percent"], "%", None, "{:.1f}"),
        at_most(f"{name}: process CPU at 1 Hz", doc["cpu_percent"], "%", None, "{:.1f}"),
        at_most(f"{name}: key → screen (median)", doc["key_ms"], "ms", 100.0),
        at_most(f"{name}: peak RSS", doc["rss_mb"], "MB", None),
    ]


def history_rows(doc: dict[str, Any]) -> list[Row]:
    return [
        at_most("history: ingest 1,024 GPUs, per tick", doc["ingest_1024_tick_ms"], "ms", None, "{:.2f}"),
        at_most("history: 30 days × 64 GPUs, set-up", doc["month_setup_s"], "s", 60.0, "{:.1f}"),
        at_most("history: 30 days × 64 GPUs, on disk", doc["month_on_disk_mb"], "MB", 200.0, "{:.1f}"),
        at_most("history: 24 h chart, read + render", doc["chart_24h_ms"], "ms", 50.0, "{:.1f}"),
    ]


def prometheus_rows(doc: dict[str, Any]) -> list[Row]:
    name = f"Prometheus {doc['nodes'] * 8:,} GPUs at {doc['interval']:g} s"
    return [
        at_most(f"{name}: tick", doc["tick"] * 1000, "ms", 200.0),
        at_most(f"{name}: CPU", doc["cpu"], "%", 20.0 if doc["interval"] >= 15 else None, "{:.1f}"),
    ]


def nvml_rows(doc: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for r in doc:
        real = r["case"].startswith("real")
        target = 2.0 if "8-field" in r["case"] else None if real else 0.2
        rows.append(at_most(f"NVML: {r['case']}, per GPU", r["per GPU ms"], "ms", target, "{:.3f}"))
    return rows


def costs_rows(doc: dict[str, Any]) -> list[Row]:
    return [at_most(f"costs: compose, {int(r['gpus']):,} GPUs", r["compose ms"], "ms", None, "{:.1f}") for r in doc.values()]


def autopilot_rows(doc: dict[str, Any]) -> list[Row]:
    return [at_most(f"autopilot: {int(doc['rules'])} rules over {int(doc['gpus']):,} GPUs, CPU a refresh",
                    doc["cpu median ms"], "ms", 5.0, "{:.2f}")]


def big_fleet_rows(doc: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for r in doc:
        big = r["fleet"] == "big"
        name = f"{r['fleet']} demo, {r['gpus']:,} GPUs, {r['jobs']:,} jobs"
        rows.append(at_most(f"{name}: complete overview", r["overview_s"], "s", 3.0 if big else None, "{:.2f}"))
        rows.append(at_most(f"{name}: peak RSS", r["rss_mb"], "MB", 300.0 if big else None))
        rows.append(at_most(f"{name}: pane switch (p95)", r["pane_p95_ms"], "ms", 150.0 if big else None))
        rows.append(at_most(f"{name}: filter keystroke (p95)", r["filter_p95_ms"], "ms", 150.0 if big else None))
    return rows


def paste_rows(doc: dict[str, Any]) -> list[Row]:
    cases = doc["cases"]
    length = f"{doc['length']:,} characters"
    return [
        at_most(f"paste: key after a plain paste of {length}", cases["plain"]["median_ms"], "ms", 200.0),
        at_most(f"paste: key after a bracketed paste of {length}", cases["bracketed"]["median_ms"], "ms", None),
        at_most("paste: one key, no paste (peer)", cases["key"]["median_ms"], "ms", None),
    ]


def serving_rows(doc: dict[str, Any]) -> list[Row]:
    name = f"serving {doc['services']:,} services × {doc['replicas']}"
    fleet = doc["fleet_poll_ms"]
    return [
        at_most(f"{name}: refresh (median)", doc["refresh_ms"]["median"], "ms", doc["target_ms"]),
        at_most(f"{name}: query + parse (median)", doc["poll_ms"]["median"], "ms", None),
        at_most(f"{name}: compose (median)", doc["compose_ms"]["median"], "ms", None),
        at_most(f"serving peer: GPU fleet {doc['fleet_gpus']:,} GPUs, poll (median)", fleet["median"], "ms", None),
        Row(f"{name}: queries a refresh (5 services: same)", f"{doc['queries_sent']} ({doc['queries_sent_5_services']})",
            f"{doc['queries']}", doc["queries_sent"] == doc["queries_sent_5_services"] == doc["queries"]),
    ]


@dataclass(frozen=True)
class Bench:
    script: str
    quick: tuple[str, ...]
    full: tuple[str, ...]
    rows: Callable[[Any], list[Row]]
    budget_s: float  # how long it may take before it is stopped (full runs take longer)


BENCHES = (
    Bench("startup_idle.py", ("--quick",), (), startup_rows, 900),
    Bench("fleet_refresh.py", ("--gpus", "1024", "--gpus", "8192", "--seconds", "5", "--settle", "3"), (), fleet_rows, 900),
    Bench("jobs_scale.py", ("--seconds", "4", "--settle", "1"), (), jobs_rows, 900),
    Bench("kube_jobs.py", ("--jobs", "10000", "--runs", "1"), (), kube_rows, 900),
    Bench("instances_scale.py", ("--seconds", "5", "--settle", "2"), (), instances_rows, 600),
    Bench("history.py", ("--runs", "1", "--setup-runs", "1"), (), history_rows, 900),
    Bench("prometheus_fleet.py", ("--interval", "15", "--seconds", "31"), ("--interval", "15", "--seconds", "60"),
          prometheus_rows, 900),
    Bench("nvml_poll.py", ("--runs", "300", "--real-runs", "30"), (), nvml_rows, 300),
    Bench("costs.py", ("--runs", "5"), (), costs_rows, 300),
    Bench("autopilot_rules.py", ("--runs", "100"), (), autopilot_rows, 300),
    Bench("big_fleet.py", ("--runs", "1", "--rounds", "2"), (), big_fleet_rows, 900),
    Bench("paste.py", ("--runs", "2"), (), paste_rows, 600),
    Bench("serving_refresh.py", ("--refreshes", "10"), (), serving_rows, 600),
)


def last_json(stdout: str) -> Any:
    """The JSON document a script prints after its table (from the first line opening one)."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("{", "[")):
            return json.loads("\n".join(lines[i:]))
    raise ValueError("no JSON in its output")


def run(bench: Bench, quick: bool) -> tuple[list[Row], float]:
    args = [sys.executable, str(HERE / bench.script), *(bench.quick if quick else bench.full), "--json"]
    print(f"== {' '.join(args[1:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False, timeout=bench.budget_s * (1 if quick else 4))
    except subprocess.TimeoutExpired:
        return [Row(bench.script, "did not finish", "", False)], time.perf_counter() - t0
    took = time.perf_counter() - t0
    table = out.stdout.split("\n{")[0].split("\n[")[0]
    print(table.rstrip(), file=sys.stderr, flush=True)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return [Row(bench.script, f"failed (exit {out.returncode})", "", False)], took
    try:
        return bench.rows(last_json(out.stdout)), took
    except (ValueError, KeyError, TypeError) as exc:
        return [Row(bench.script, f"unreadable output: {exc}", "", False)], took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs of every script (a smoke test of the figures)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this script (repeatable; e.g. jobs_scale)")
    parser.add_argument("--json", action="store_true", help="print the combined table as JSON after it")
    args = parser.parse_args()
    chosen = [b for b in BENCHES if not args.only or b.script.removesuffix(".py") in args.only or b.script in args.only]
    load_before = os.getloadavg()
    rows: list[Row] = []
    for bench in chosen:
        got, took = run(bench, args.quick)
        print(f"   ({took:.0f} s)", file=sys.stderr, flush=True)
        rows.extend(got)
    load_after = os.getloadavg()
    width = max(len(r.figure) for r in rows)
    mwidth = max(max(len(r.measured) for r in rows), len("measured"))
    twidth = max(max(len(r.target) for r in rows), len("target"))
    print(f"{'figure':<{width}} | {'measured':>{mwidth}} | {'target':<{twidth}} | met?")
    print(f"{'-' * width}-+-{'-' * mwidth}-+-{'-' * twidth}-+-----")
    for r in rows:
        print(f"{r.figure:<{width}} | {r.measured:>{mwidth}} | {r.target:<{twidth}} | {r.verdict}")
    met = sum(1 for r in rows if r.met)
    targeted = sum(1 for r in rows if r.met is not None)
    print(f"\n{met} of {targeted} targets met; {'quick' if args.quick else 'full'} runs; {os.cpu_count()} CPUs; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    if args.json:
        print(json.dumps([{"figure": r.figure, "measured": r.measured, "target": r.target, "met": r.met} for r in rows],
                         indent=2))
    broken = any(r.measured.startswith(("failed", "did not", "unreadable")) for r in rows)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
