"""The big demo fleet, as a user starts it: time to a complete overview, memory, pane switches
and filter keystrokes, beside the default demo measured in the same run.

    .venv/bin/python benchmarks/big_fleet.py                  # 3 runs of each fleet, in turn
    .venv/bin/python benchmarks/big_fleet.py --runs 5 --json
    .venv/bin/python benchmarks/big_fleet.py --runs 1 --rounds 2   # a smoke run (as run_all --quick)

Fleets: ``default`` is ``gpuconsole --demo`` (58 GPUs over its three clouds, the live jobs only);
``1k`` is ``--demo-nodes 139`` (1,060 GPUs, the live jobs only); ``big`` is ``gpuconsole --demo
--demo-nodes 1024 --demo-jobs 100000`` (1,024 nodes, 7,610 GPUs, about 100,000 jobs). All three
run by default, the smaller two as the peers of the big one. Each run of each fleet is a
fresh child process, built as ``gpuconsole`` builds it (the app paints its "starting" frame,
then builds the Console off the UI thread, with the cache database in a fresh temporary
directory, as on a first start; ``--no-db`` leaves it out), headless at 120×36, every frame
encoded to the terminal's escape codes as a terminal driver would (``benchmarks/keylat.py``
hooks the frames and keeps their text).
Measured:

- complete overview: from just before the child process is started (interpreter start, every
  import, the simulated world, the first poll of every source) to the end of the first frame in
  which every source is ``live``, every pane is mounted, and every Overview card (GPUs, jobs,
  instances, spend, sources, alerts) shows that data on screen: none waiting for its source;
- RSS: the child's resident memory at that frame, its peak over the whole run, and its peak
  before the Experiments pane is first shown (that pane's demo experiment is analysed with
  SciPy, whose import adds about 66 MB in any fleet);
- pane switch: a number key sent as the terminal driver sends it, to the end of the first frame
  that shows that pane's data: its first line (source and counts), the first row of each of its
  tables (or their headers, when empty), the Overview's cards. Keys 0.3 s apart, so they meet
  the 1 s refresh at every phase: ``2`` … ``7`` and ``1`` (each pane's first showing, its rows
  built for the first time), the filter keystrokes below, ``8`` and ``1``, then ``--rounds``
  − 1 more rounds of all eight;
- filter keystroke: ``/`` in the Jobs pane, then every letter of five words typed one by one
  (0.15 s apart), each to the end of the first frame showing the narrowed table (``filter: …``
  and the first rows' names, ``KeyLatency.filter_shown``); Esc between words.

Figures are medians over the runs with their range (min–max) for the start-up figures; keys are
pooled over the runs, with the median and the 95th percentile. The load average before and
after is printed with the table: this machine is shared, and every figure moves with it.
Targets (the big fleet): complete overview ≤ 3 s, RSS ≤ 300 MB, pane switch and filter
keystroke ≤ 150 ms at the 95th percentile.

``--tree DIR`` runs the console from another copy of the source, a whole tree (for example
``mkdir /tmp/before && git archive HEAD~3 | tar -x -C /tmp/before``); ``--before DIR`` runs that
copy too, each of its children right beside the checkout's for the same fleet (which goes first
swaps every run), so a before/after pair meets the same moment of a shared machine. ``--profile DIR`` writes each child's cProfile to DIR (it slows the child down).

gpuconsole's modules are byte-compiled before the runs (into the tree's ``__pycache__``), so every
start imports bytecode, as after ``pip install``, which compiles every module once, or after a
first start of a checkout. Where ``PYTHONDONTWRITEBYTECODE=1`` is set (as on the shared
machine), an editable install never writes that cache, and every start compiled gpuconsole's
few hundred modules from source, about 0.3 s of CPU of the big fleet's start: no user pays that
twice. ``--no-compile`` leaves the tree as it is (remove its ``__pycache__`` folders first to
measure starts from source).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # a child's first reading, before gpuconsole or Textual is imported

import argparse  # noqa: E402 - after the clock on purpose
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FLEETS: dict[str, list[str]] = {
    "default": [],
    "1k": ["--demo-nodes", "139"],  # 1,060 GPUs, the live jobs only
    "big": ["--demo-nodes", "1024", "--demo-jobs", "100000"],
}
RUN_BY_DEFAULT = ("default", "1k", "big")
AT = "2026-11-16T14:00Z"
SIZE = (120, 36)
PANE_KEYS = "23456781"
PANE_SPACING_S = 0.3
FILTER_WORDS = ("bert", "yolo", "failed", "team-vision", "whisper")
FILTER_SPACING_S = 0.15
TARGETS = {"overview_s": 3.0, "rss_mb": 300.0, "pane_p95_ms": 150.0, "filter_p95_ms": 150.0}


def log(message: str) -> None:
    print(f"[big] {message}", file=sys.stderr, flush=True)


def use_tree(tree: str | None) -> None:
    """Import gpuconsole from ``tree`` instead of this checkout (whose editable install would
    otherwise be found first)."""
    if not tree:
        return
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")
                        and "__editable__" not in repr(f)]
    sys.path.insert(0, str(Path(tree).resolve()))


def rss_mb() -> float:
    """Resident memory now (Linux), MB."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def percentile(values: list[float], share: float) -> float:
    """The ``share`` percentile (0–1) of ``values``, by linear interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    at = share * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


# ---------------------------------------------------------------------- what "shown" means
def card_lines(app: Any) -> list[str] | None:
    """The first line of each Overview card as drawn from the snapshot, or None while a card
    is missing or waits for its source."""
    from gpuconsole.ui.panes.overview import CARDS
    from gpuconsole.ui.widgets.text_view import TextView

    pane = app.query("#overview-pane")
    if not pane:
        return None
    lines = []
    for key in CARDS:
        found = pane.first().query(f"#card-{key}")
        shown = found.first(TextView)._shown if found else None
        if shown is None or "waiting for a first answer" in shown.plain:
            return None
        lines.append(shown.plain.splitlines()[0][:24].strip() if shown.plain else "")
    return lines


def pane_words(app: Any, pane: Any) -> list[str] | None:
    """Words on screen once ``pane`` shows its data (None: it has not taken a snapshot yet):
    its first line, the first row (or header) of each table it displays, the Overview's cards."""
    from gpuconsole.ui.widgets.text_view import TextView
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    if pane.snapshot is None:
        return None
    words = []
    line = pane.query_one(".source-line", TextView)._shown
    if line is not None and line.plain.strip():
        words.append(line.plain.strip()[:50])
    if pane.id == "overview-pane":
        cards = card_lines(app)
        if cards is None:
            return None
        words.extend(w for w in cards if w)
    for table in pane.query(VirtualTable):
        if not table.display or not all(node.display for node in table.ancestors_with_self if hasattr(node, "display")):
            continue
        if table.row_count:
            top = min(max(0, round(table.scroll_y)), table.row_count - 1)
            cells = table._cells_of(table._keys[top])  # noqa: SLF001 - what the row draws
            texts = [(c.plain if hasattr(c, "plain") else str(c)).strip() for c in cells]
            widths = table._widths or [20] * len(texts)  # noqa: SLF001
            cut = [t[: max(1, min(15, w - 1))] for t, w in zip(texts, widths, strict=False) if len(t) >= 3]
            if cut:
                words.append(cut[0])
        else:
            words.append(table.column_label(table._column_spec[0][1]).strip())  # noqa: SLF001
    return words


def pane_shown(keys: Any, app: Any, pane_id: str) -> Callable[[], bool]:
    def done() -> bool:
        if app.active_pane != pane_id:
            return False
        pane = app.current_pane
        if pane is None:
            return False
        words = pane_words(app, pane)
        return words is not None and all(keys.on_screen(w) for w in words)

    return done


def overview_complete(keys: Any, app: Any) -> Callable[[], bool]:
    from gpuconsole.model import SourceState
    from gpuconsole.ui.registry import PANES

    def done() -> bool:
        if app.core is None or app.snapshot is None or not app.snapshot.sources:
            return False
        if any(s.state is not SourceState.LIVE for s in app.snapshot.sources):
            return False
        if any(not app.query(f"#{spec.id}-pane") for spec in PANES):
            return False
        pane = app.current_pane
        if pane is None or pane.id != "overview-pane" or pane.snapshot is not app.snapshot:
            return False
        lines = card_lines(app)
        return lines is not None and all(keys.on_screen(w) for w in lines if w)

    return done


# ---------------------------------------------------------------------- one child
async def measure(fleet: str, rounds: int, use_db: bool) -> dict[str, Any]:
    from keylat import KeyLatency

    from gpuconsole.cli.main import full_console, parse_args
    from gpuconsole.ui.app import GpuConsoleApp

    work = Path(tempfile.mkdtemp(prefix="gpuconsole-big-"))
    argv = ["--demo", "--demo-at", AT, *FLEETS[fleet]]
    if use_db:
        os.environ["GPUCONSOLE_DB"] = str(work / "gpuconsole.db")
    else:
        argv.append("--no-db")
    args = parse_args(argv)
    app = GpuConsoleApp(build=lambda: full_console(args))  # as gpuconsole.cli.main.run_console
    keys = KeyLatency(app)
    out: dict[str, Any] = {"fleet": fleet, "t0": T0}
    pacing = paced(app)
    pacing.__enter__()  # as run_console paces the full collections beside app.run()
    try:
        async with app.run_test(size=SIZE) as pilot:
            first = await keys.frame(overview_complete(keys, app), (T0, 0.0), timeout=300)
            out["overview_in_child_s"] = first.wall
            out["rss_overview_mb"] = rss_mb()
            snap = app.snapshot
            out.update(gpus=len(snap.gpus), jobs=len(snap.jobs), instances=len(snap.instances))
            log(f"{fleet}: complete overview {first.wall:.2f} s after the child's first line, "
                f"{out['gpus']:,} GPUs, {out['jobs']:,} jobs, RSS {out['rss_overview_mb']:.0f} MB")
            await asyncio.sleep(1.0)

            switches: list[dict[str, Any]] = []
            shown: set[str] = set()

            async def switch(pane_keys: str, round_: int) -> None:
                for key in pane_keys:
                    pane_id = next(spec.id for spec in _panes() if spec.key == key)
                    await asyncio.sleep(PANE_SPACING_S)
                    took = await keys.press(key, pane_shown(keys, app, pane_id), timeout=60)
                    switches.append({"pane": pane_id, "round": round_, "first": pane_id not in shown,
                                     "ms": 1000 * took.wall, "cpu_ms": 1000 * took.cpu, "rss_mb": rss_mb()})
                    shown.add(pane_id)

            # Every pane but the Experiments (its demo analysis loads SciPy, the same in any
            # fleet), the filter keystrokes, then the Experiments and the other rounds of all eight.
            await switch(PANE_KEYS.replace("8", ""), 0)
            out["filter"] = await type_filters(keys, app)
            out["rss_peak_no_experiments_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            await switch("81", 0)
            for round_ in range(1, rounds):
                await switch(PANE_KEYS, round_)
            out["switches"] = switches
            out["rss_end_mb"] = rss_mb()
            await pilot.pause()
    finally:
        pacing.__exit__(None, None, None)
        keys.close()
        app.close_core()
        shutil.rmtree(work, ignore_errors=True)
    out["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def paced(app: Any) -> contextlib.AbstractContextManager[None]:
    """The full collections paced as run_console paces them (as the interpreter would, in a
    tree from before that: ``--tree``)."""
    try:
        from gpuconsole.ui.collector import pace_collections
    except ImportError:
        return contextlib.nullcontext()
    return pace_collections(app).beside()


async def type_filters(keys: Any, app: Any) -> list[dict[str, Any]]:
    """``/`` in the Jobs pane, then each word of :data:`FILTER_WORDS` letter by letter, each
    letter timed to the narrowed table on screen; Esc after each word."""
    from gpuconsole.ui.panes.base import FilterInput
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    await asyncio.sleep(PANE_SPACING_S)
    if app.active_pane != "jobs":
        await keys.press("3", pane_shown(keys, app, "jobs"), timeout=60)
    pane = app.query_one("#jobs-pane")
    table = pane.query_one("#job-table", VirtualTable)
    field = pane.query_one(FilterInput)
    typed: list[dict[str, Any]] = []
    for word in FILTER_WORDS:
        await asyncio.sleep(FILTER_SPACING_S)
        keys.send("slash")
        while not field.has_focus:
            await asyncio.sleep(0.005)
        for i, letter in enumerate(word):
            await asyncio.sleep(FILTER_SPACING_S)
            done = keys.filter_shown(table, word[: i + 1], name_cell(table))
            took = await keys.press(letter, done, timeout=60)
            typed.append({"text": word[: i + 1], "ms": 1000 * took.wall, "cpu_ms": 1000 * took.cpu,
                          "rows": table.row_count})
        keys.send("escape")
        while pane.filter_text or field.has_focus:
            await asyncio.sleep(0.005)
    return typed


def name_cell(table: Any) -> Callable[[str], str]:
    """The NAME cell of a row as ``table`` draws it (a gang's role rows have no job of their own);
    read from the row's cells, not through :meth:`VirtualTable.get_cell`, whose key-to-row index
    over 100,000 rows would be built inside the timed frame."""
    index = table._column_index["name"]  # noqa: SLF001
    return lambda key: str(table._cells_of(key)[index]).strip()  # noqa: SLF001


def _panes() -> Any:
    from gpuconsole.ui.registry import PANES

    return PANES


def compile_tree(tree: Path) -> None:
    """Byte-compile gpuconsole and these benchmarks in ``tree`` (the cache is written even where
    the environment says not to), quietly: the children then import bytecode."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    folders = [str(tree / "gpuconsole"), str(ROOT / "benchmarks")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env, check=True,
                   stdout=subprocess.DEVNULL, timeout=600)


def child(opts: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    use_tree(opts.tree)
    profile = None
    if opts.profile:
        import cProfile

        Path(opts.profile).mkdir(parents=True, exist_ok=True)
        profile = cProfile.Profile()
        profile.enable()
    result = asyncio.run(measure(opts.child, opts.rounds, not opts.no_db))
    if profile is not None:
        profile.disable()
        profile.dump_stats(str(Path(opts.profile) / f"big_fleet-{opts.child}-{os.getpid()}.prof"))
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------- the parent
def run_child(fleet: str, opts: argparse.Namespace, tree: str | None) -> dict[str, Any]:
    args = [sys.executable, __file__, "--child", fleet, "--rounds", str(opts.rounds)]
    if opts.no_db:
        args.append("--no-db")
    if tree:
        args += ["--tree", tree]
    if opts.profile:
        args += ["--profile", opts.profile]
    env = {**os.environ}
    env.pop("GPUCONSOLE_DB", None)
    started = time.perf_counter()  # the system-wide monotonic clock, as the child's T0
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False, timeout=900, env=env)
    if out.returncode != 0:
        print(out.stderr[-4000:], file=sys.stderr)
        raise RuntimeError(f"the {fleet} child failed (exit {out.returncode})")
    sys.stderr.write(out.stderr)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["overview_s"] = row["t0"] - started + row["overview_in_child_s"]
    return row


def spread(values: list[float], fmt: str) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def summarize(fleet: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    switches = [s for r in rows for s in r["switches"]]
    first = [s["ms"] for s in switches if s["first"]]
    later = [s["ms"] for s in switches if not s["first"]]
    keys = [k["ms"] for r in rows for k in r["filter"]]
    by_pane: dict[str, list[float]] = {}
    for s in switches:
        by_pane.setdefault(str(s["pane"]), []).append(float(s["ms"]))
    return {
        "fleet": fleet, "runs": len(rows), "gpus": rows[0]["gpus"], "jobs": rows[0]["jobs"],
        "instances": rows[0]["instances"],
        "overview_s": statistics.median(r["overview_s"] for r in rows),
        "overview_s_all": [r["overview_s"] for r in rows],
        "rss_overview_mb": statistics.median(r["rss_overview_mb"] for r in rows),
        "rss_mb": statistics.median(r["rss_peak_mb"] for r in rows),
        "rss_mb_all": [r["rss_peak_mb"] for r in rows],
        "rss_no_experiments_mb": statistics.median(r["rss_peak_no_experiments_mb"] for r in rows),
        "rss_no_experiments_mb_all": [r["rss_peak_no_experiments_mb"] for r in rows],
        "pane_ms": statistics.median(s["ms"] for s in switches),
        "pane_p95_ms": percentile([float(s["ms"]) for s in switches], 0.95),
        "pane_max_ms": max(s["ms"] for s in switches),
        "pane_first_ms": statistics.median(first) if first else math.nan,
        "pane_first_max_ms": max(first) if first else math.nan,
        "pane_later_p95_ms": percentile(later, 0.95),
        "pane_worst_by_pane_ms": {p: max(v) for p, v in by_pane.items()},
        "filter_ms": statistics.median(keys),
        "filter_p95_ms": percentile(keys, 0.95),
        "filter_max_ms": max(keys),
        "filter_cpu_ms": statistics.median(k["cpu_ms"] for r in rows for k in r["filter"]),
        "keys": {"switches": len(switches), "filter": len(keys)},
    }


def met(summary: dict[str, Any]) -> dict[str, bool | None]:
    if not summary["fleet"].startswith("big"):
        return {k: None for k in TARGETS}
    return {k: summary[k] <= v for k, v in TARGETS.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="child processes per fleet, alternated (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the pane keys per child (default 3)")
    parser.add_argument("--fleet", action="append", choices=list(FLEETS),
                        help="this fleet (repeatable; default: all three; 1k is --demo-nodes 139, 1,060 GPUs)")
    parser.add_argument("--no-db", action="store_true", help="run without the cache database (--no-db)")
    parser.add_argument("--tree", help="run gpuconsole from this copy of its source instead of the checkout")
    parser.add_argument("--before", help="also run this copy of the source, each of its children right beside the "
                                         "same fleet's (their order swapped every run): before and after, one sitting")
    parser.add_argument("--profile", help="write each child's cProfile into this folder")
    parser.add_argument("--no-compile", action="store_true",
                        help="do not byte-compile the tree first (its __pycache__ as it is)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    parser.add_argument("--child", choices=sorted(FLEETS), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        return child(opts)
    fleets = opts.fleet or list(RUN_BY_DEFAULT)
    trees = {"": opts.tree, " before": opts.before} if opts.before else {"": opts.tree}
    if not opts.no_compile:
        for tree in trees.values():
            compile_tree(Path(tree).resolve() if tree else ROOT)
    load_before = os.getloadavg()
    rows: dict[str, list[dict[str, Any]]] = {f + label: [] for f in fleets for label in trees}
    for run in range(opts.runs):
        order = fleets if run % 2 == 0 else fleets[::-1]
        labels = list(trees) if run % 2 == 0 else list(trees)[::-1]
        for fleet in order:
            for label in labels:
                rows[fleet + label].append(run_child(fleet, opts, trees[label]))
    load_after = os.getloadavg()
    summaries = [summarize(f + label, rows[f + label]) for f in fleets for label in trees]
    print(f"{'fleet':<15} {'GPUs':>6} {'jobs':>8} {'complete overview':>22} {'RSS peak':>18} {'pane switch med/p95':>20}"
          f" {'first show med/max':>19} {'filter key med/p95':>19}   targets (big fleet)")
    for s in summaries:
        verdict = met(s)
        words = "" if not s["fleet"].startswith("big") else " · ".join(
            f"{name} {'met' if ok else 'NOT met'}" for name, ok in
            (("overview ≤ 3 s", verdict["overview_s"]), ("RSS ≤ 300 MB", verdict["rss_mb"]),
             ("pane p95 ≤ 150 ms", verdict["pane_p95_ms"]), ("filter p95 ≤ 150 ms", verdict["filter_p95_ms"])))
        print(f"{s['fleet']:<15} {s['gpus']:>6,} {s['jobs']:>8,} {spread(s['overview_s_all'], '{:.2f}'):>20} s"
              f" {spread(s['rss_mb_all'], '{:.0f}'):>15} MB {s['pane_ms']:>10.0f}/{s['pane_p95_ms']:>5.0f} ms"
              f" {s['pane_first_ms']:>9.0f}/{s['pane_first_max_ms']:>5.0f} ms {s['filter_ms']:>9.0f}/{s['filter_p95_ms']:>5.0f} ms"
              f"   {words}")
    for s in summaries:
        worst = ", ".join(f"{p} {v:.0f}" for p, v in s["pane_worst_by_pane_ms"].items())
        print(f"  {s['fleet']}: RSS at the complete overview {s['rss_overview_mb']:.0f} MB, peak before the Experiments"
              f" pane {spread(s['rss_no_experiments_mb_all'], '{:.0f}')} MB; switches to a pane shown before: p95"
              f" {s['pane_later_p95_ms']:.0f} ms; worst switch per pane (ms): {worst}; {s['keys']['switches']} switches,"
              f" {s['keys']['filter']} filter keys over {s['runs']} runs")
    print(f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after;"
          f" {'no db' if opts.no_db else 'a fresh cache database'}; headless {SIZE[0]}×{SIZE[1]};"
          f" {'bytecode as the tree has it' if opts.no_compile else 'gpuconsole byte-compiled'}")
    if opts.json:
        print(json.dumps(summaries, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
