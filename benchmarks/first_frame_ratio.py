"""First frame, side by side: a bare Textual app and gpuconsole, started the same way, alternated.

    .venv/bin/python benchmarks/first_frame_ratio.py            # five pairs (target: ratio ≤ 1.5)
    .venv/bin/python benchmarks/first_frame_ratio.py --pairs 9 --json

Each pair runs the bare app (``textual_floor.py``: the same frame shape, no data, no gpuconsole
code) and then the console on the default demo (``first_frame_child.py``, as
``gpuconsole --demo --no-db`` builds it), each in a fresh interpreter, one right after the other,
so both meet the same moment of a shared, noisy machine. Both are timed from their first line to
a painted frame, plus the interpreter's own start (``python -c pass``, measured once). Reported:
the medians with their spread, and the ratio of each pair (console / bare) with its median.

For the console two frames are timed, each as a ratio to the bare app's frame of the same pair:
the first frame (the console's frame, "starting": top line, pane strip and footer, painted before
the Console is built, as ``gpuconsole`` does; target ≤ 1.5×), and the first complete frame (every
source live: the world's first snapshot on screen), reported beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup_idle import ChildEnv, Fleet, first_frame_once, interpreter_start, textual_floor  # noqa: E402

TARGET = 1.5


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}–{max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="bare/console pairs, alternated (default 5)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()
    python = sys.executable
    work = Path("/tmp")
    env = ChildEnv.make(work, pyc_cache=True)  # as after pip install: every module read from bytecode
    interp_s = statistics.median(interpreter_start(python, 5, env))
    fleet = Fleet("default", None, 0)
    first_frame_once(python, env, fleet, args.seed, None, interp_s)  # uncounted: fills the bytecode caches
    bare, paint, live, ratios, live_ratios = [], [], [], [], []
    for i in range(args.pairs):
        b = textual_floor(python, env, 1, interp_s)[0]
        run = first_frame_once(python, env, fleet, args.seed, None, interp_s)
        first_paint = interp_s + run["phases_s"]["first_paint"]
        bare.append(b)
        paint.append(first_paint)
        live.append(run["seconds"])
        ratios.append(first_paint / b)
        live_ratios.append(run["seconds"] / b)
        print(f"[first-frame] pair {i + 1}/{args.pairs}: bare {b:.3f} s, console first frame {first_paint:.3f} s "
              f"(ratio {ratios[-1]:.2f}), complete {run['seconds']:.3f} s (ratio {live_ratios[-1]:.2f})",
              file=sys.stderr, flush=True)
    ratio = statistics.median(ratios)
    live_ratio = statistics.median(live_ratios)
    rows = [
        ("bare Textual app, first frame", spread(bare)),
        ("gpuconsole --demo, first frame (starting)", spread(paint)),
        ("gpuconsole --demo, first complete frame", spread(live)),
        ("ratio first frame / bare, per pair", f"{ratio:.2f} ({min(ratios):.2f}–{max(ratios):.2f}), target ≤ {TARGET}"),
        ("ratio complete frame / bare, per pair", f"{live_ratio:.2f} ({min(live_ratios):.2f}–{max(live_ratios):.2f})"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"interpreter start {interp_s * 1000:.0f} ms (included in every figure)")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json:
        print(json.dumps({"interpreter_start_s": interp_s, "bare_s": bare, "first_paint_s": paint,
                          "complete_s": live, "ratios": ratios, "ratio_median": ratio, "complete_ratios": live_ratios,
                          "complete_ratio_median": live_ratio, "target": TARGET}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
