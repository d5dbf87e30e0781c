"""Regenerate the SVG screenshots in this folder from the seeded, frozen demo.

    .venv/bin/python screenshots/make_screenshots.py [NAME ...]

With names (``services``, ``gpu-detail`` …) only those are shot again. Every pane at 120×36, plus the GPU detail view, the key help and the launch wizard's first two
steps, with the dark theme. The Autopilot pane is shot after four minutes of the demo's rules.
The demo is frozen at a fixed moment (tests/showcase.py), so the pictures change only when
what the console shows changes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.showcase import FrozenClock, record_history, run_autopilot, showcase_console  # noqa: E402
from gpuconsole.model import SourceState  # noqa: E402
from gpuconsole.ui.app import GpuConsoleApp  # noqa: E402

HERE = Path(__file__).resolve().parent
SIZE = (120, 36)
WAIT = "(wait)"  # let a worker (the wizard's catalog, its prices) answer before the next key
SHOTS: dict[str, tuple[str, ...]] = {
    "overview": ("1",),
    "gpus": ("2",),
    "jobs": ("3",),
    "jobs-roles": ("3", "slash", *"research", "enter"),  # the demo's MPIJob and PyTorchJob
    "queues": ("3", "Q", "down"),  # the demo's Kueue: research's quota, its gang and its run waiting for nodes
    "instances": ("4",),
    "budgets": ("5",),
    "gpu-detail": ("2", "down", "enter"),
    "processes": ("2", "f5"),
    "help": ("question_mark",),
    "launch-wizard": ("4", "n", WAIT),
    "launch-prices": ("4", "n", WAIT, "enter", WAIT),
    "autopilot": ("7",),
    "experiments": ("8", WAIT, WAIT, WAIT, WAIT),  # the demo's experiments are seeded in a worker
    "services": ("9",),
}
AUTOPILOT_S = 240  # the autopilot shot: four minutes of the demo's rules deciding and acting


async def shoot(name: str, keys: tuple[str, ...], db: Path) -> Path:
    clock = FrozenClock()
    console = showcase_console(db=db, clock=clock)
    record_history(console, clock, 300)
    if name == "autopilot":
        run_autopilot(console, clock, AUTOPILOT_S)
    app = GpuConsoleApp(console, theme_name="dark")
    try:
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.monotonic() + 10
            while not all(s.state is SourceState.LIVE for s in app.snapshot.sources):
                if time.monotonic() > deadline:
                    raise RuntimeError("the demo's sources did not come up")
                await asyncio.sleep(0.02)
            await pilot.pause()
            for key in keys:
                if key == WAIT:
                    await pilot.pause(0.8)
                    continue
                await pilot.press(key)
                await pilot.pause()
            await pilot.pause(0.3)
            return Path(app.save_screenshot(filename=f"{name}.svg", path=str(HERE)))
    finally:
        console.close()


async def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in SHOTS]
    if unknown:
        print(f"no such screenshot: {', '.join(unknown)} (choose from {', '.join(SHOTS)})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, keys) in enumerate(SHOTS.items()):
            if names and name not in names:
                continue
            path = await shoot(name, keys, Path(tmp) / f"{n}.db")
            print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
