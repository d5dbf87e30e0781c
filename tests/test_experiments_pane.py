"""The Experiments pane on the seeded demo: snapshots, the calculator filled from a measured arm,
stop and re-run through the core, export."""

from __future__ import annotations

import json

import pytest

from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.panes.experiment_chart import chart_text
from gpuconsole.ui.panes.experiments import ExperimentsPane
from tests.helpers import all_live, demo_console, wait_until

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


@pytest.fixture
def frozen_app():
    consoles = []

    def make() -> GpuConsoleApp:
        console = demo_console()
        consoles.append(console)
        return GpuConsoleApp(console, theme_name="dark")

    yield make
    for console in consoles:
        console.close()


def pane_of(app) -> ExperimentsPane:
    return app.query_one("#experiments-pane", ExperimentsPane)


def loaded(app) -> bool:
    try:
        pane = pane_of(app)
    except Exception:  # noqa: BLE001 - not mounted yet
        return False
    return pane.loaded is not None and pane.loaded.analysis is not None


async def open_pane(pilot, *keys: str) -> ExperimentsPane:
    await wait_until(lambda: all_live(pilot.app))
    await pilot.press("8")
    await wait_until(lambda: loaded(pilot.app), timeout=30)
    await pilot.pause()
    for key in keys:
        await pilot.press(key)
        await pilot.pause()
    await pilot.pause(0.1)
    return pane_of(pilot.app)


@pytest.mark.parametrize("size", SIZES)
def test_experiments_pane(snap_compare, frozen_app, size) -> None:
    async def run_before(pilot) -> None:
        await open_pane(pilot)

    assert snap_compare(frozen_app(), terminal_size=SIZES[size], run_before=run_before)


async def test_it_lists_both_seeded_experiments_and_charts_the_finished_one(frozen_app) -> None:
    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = await open_pane(pilot)
        names = {p.name: p for p in pane.loaded.progress}
        assert names["resnet50-epoch"].state == "done" and names["resnet50-epoch"].done == 18
        assert names["resnet50-infer"].state == "running" and 0 < names["resnet50-infer"].done < 12
        analysis = pane.loaded.analysis
        assert analysis.spec.name == "resnet50-epoch" and len(analysis.arms) == 6
        chart = chart_text(analysis, 100, pane.palette).plain
        assert "$ per epoch" in chart and "├" in chart and "┤" in chart
        cheapest = min(analysis.arms, key=lambda a: a.cost_per_work)
        assert f"{cheapest.arm.title}" in chart


async def test_use_in_calculator_fills_speed_and_price_from_the_arm(frozen_app) -> None:
    from textual.widgets import Input

    from gpuconsole.core.money.calculator import PRESETS
    from gpuconsole.ui.screens.calculator import CostCalculatorScreen

    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = await open_pane(pilot, "enter", "down", "down")  # the arms table: g5.xlarge on-demand
        arm = pane.selected_arm()
        assert arm == "g5-xl-od"
        await pilot.press("c")
        await wait_until(lambda: isinstance(app.screen, CostCalculatorScreen))
        await pilot.pause()
        screen = app.screen
        price = float(screen.query_one("#in-gpu_hour_price", Input).value)
        speed = float(screen.query_one("#in-cloud_speed", Input).value)
        assert price == pytest.approx(1.006, abs=0.01)  # g5.xlarge on-demand, one GPU
        assert 0.25 < speed < 0.45  # one A10G against one A100 of the p4d arm (the first, the reference)
        assert "measured: g5.xlarge on-demand in resnet50-epoch" in screen.cloud_label
        assert PRESETS["resnet50"].inputs.cloud_speed == 1.5  # the preset stays the guide's
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert screen.query_one("#in-cloud_speed", Input).value == "1.5"


async def test_stop_asks_then_stops_the_running_experiment(frozen_app) -> None:
    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = await open_pane(pilot, "down")
        assert pane.selected_name() == "resnet50-infer"
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await wait_until(lambda: pane.book.store.experiment("resnet50-infer").state == "stopped")
        runs = pane.book.runs("resnet50-infer")
        assert not any(r.state in ("running", "pending") for r in runs)
        assert any(r.request.kind.value == "delete-job" for r in app.core.services.actions.recent())


async def test_export_writes_csv_and_json(frozen_app, tmp_path) -> None:
    from gpuconsole.core.paths import demo_exports_dir

    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await open_pane(pilot, "e")
        folder = demo_exports_dir()  # a demo's exports, never the real state folder
        await wait_until(lambda: (folder / "experiment-resnet50-epoch.json").exists())
        data = json.loads((folder / "experiment-resnet50-epoch.json").read_text())
        assert data["name"] == "resnet50-epoch" and len(data["arms"]) == 6
        assert (folder / "experiment-resnet50-epoch.csv").read_text().startswith("arm,instance_type")


async def test_n_starts_an_experiment_from_a_file_and_the_pane_follows_it(frozen_app, tmp_path) -> None:
    path = tmp_path / "p4d.toml"
    path.write_text('name = "pane-epoch"\nnamespace = "team-vision"\nimage = "nvcr.io/nvidia/pytorch:24.05-py3"\n'
                    'metric = { regex = "samples/s: ([0-9.]+)", unit = "samples/s" }\n'
                    'work = { amount = 1281167, unit = "samples", per = "epoch" }\nrepeats = 1\n'
                    '[[arms]]\ninstance_type = "p4d.24xlarge"\ngpus = 8\n', encoding="utf-8")
    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = await open_pane(pilot, "n")
        await pilot.press(*str(path), "enter")
        await wait_until(lambda: pane.book.store.experiment("pane-epoch") is not None, timeout=20)
        await wait_until(lambda: pane.book.store.experiment("pane-epoch").state == "done", timeout=60)
        runs = pane.book.runs("pane-epoch")
        assert len(runs) == 1 and runs[0].counts and runs[0].node.endswith("p4d.24xlarge")
        assert any(r.request.kind.value == "submit-job" and r.ok for r in app.core.services.actions.recent())


async def test_a_bad_file_in_the_pane_is_one_line_and_starts_nothing(frozen_app, tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nimage = "busybox"\nrepeats = 0\n[[arms]]\ninstance_type = "g5.xlarge"\n',
                    encoding="utf-8")
    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = await open_pane(pilot, "n")
        await pilot.press(*str(path), "enter")
        await wait_until(lambda: "repeats:" in pane.note)
        assert pane.book.store.experiment("x") is None
        await pilot.press("escape")
        assert not pane.query_one("#exp-file").display


async def test_f_builds_an_experiment_in_a_form_checked_before_it_starts(frozen_app) -> None:
    from textual.widgets import TextArea

    from gpuconsole.ui.screens.experiment_form import TEMPLATE, ExperimentFormScreen

    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = await open_pane(pilot, "f")
        await wait_until(lambda: isinstance(app.screen, ExperimentFormScreen))
        area = app.screen.query_one(TextArea)
        area.text = TEMPLATE.replace("repeats = 3", "repeats = 0")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, ExperimentFormScreen)  # refused: the key is named, nothing starts
        assert str(app.screen.query_one("#exp-form-error").render()).startswith("repeats: ")
        area.text = TEMPLATE.replace('"default"', '"team-vision"').replace("repeats = 3", "repeats = 1")
        await pilot.press("ctrl+s")
        await wait_until(lambda: pane.book.store.experiment("my-experiment") is not None, timeout=20)
        assert not isinstance(app.screen, ExperimentFormScreen)
        await wait_until(lambda: any(r.job.startswith("my-experiment-") for r in pane.book.runs("my-experiment")))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_file_field_shows_the_path_as_it_is_typed(frozen_app, size) -> None:
    from textual.widgets import Input

    app = frozen_app()
    async with app.run_test(size=size) as pilot:
        pane = await open_pane(pilot, "n")
        field = pane.query_one("#exp-file", Input)
        assert app.focused is field
        await pilot.press(*"runs/a.toml")
        await pilot.pause()
        assert field.content_region.height >= 1, "no row of the field is left for its text"
        assert "runs/a.toml" in app.export_screenshot().replace("&#160;", " ")
