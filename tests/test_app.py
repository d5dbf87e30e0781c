"""Drive the real app with Pilot, as a keyboard-only user at 80×24 would."""

from __future__ import annotations

from textual.widgets import Sparkline

from gpuconsole.model import SourceKind, SourceState
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.panes.base import FilterInput
from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen
from gpuconsole.ui.screens.help import HelpScreen
from tests.driving import SIZE, column, pane_text, running, shown, started, table  # noqa: F401 - shared
from tests.helpers import (
    FrozenClock,
    all_live,
    demo_console,
    record_history,
    wait_until,
)

async def test_every_pane_by_number_key():
    async with running() as (app, pilot):
        snap = app.snapshot
        overview = pane_text(app, "overview")
        busy = sum(1 for g in snap.gpus if g.busy)
        assert f"{busy} busy" in overview
        assert "pending" in overview and "on-demand" in overview
        assert "month" in overview and "live" in overview

        await pilot.press("2")
        assert app.active_pane == "gpus"
        await pilot.pause()
        slices = sum(len(g.mig_slices) for g in snap.gpus)
        processes = sum(len(g.processes) for g in snap.gpus)
        assert len(table(app, "gpu-table").shown_keys) == len(snap.gpus) + slices + processes
        assert any("1g.10gb" in m for m in column(app, "gpu-table", "model"))
        assert "GPU telemetry: sim · live" in pane_text(app, "gpus")

        await pilot.press("3")
        await pilot.pause()
        states = column(app, "job-table", "state")
        assert states[0] == "pending", "pending jobs are listed first"
        assert any("Insufficient nvidia.com/gpu" in r for r in column(app, "job-table", "reason"))
        assert len(table(app, "cron-table").shown_keys) == len(snap.cronjobs)
        # The selected pending job's reason is spelled out under the table.
        assert "Insufficient" in pane_text(app, "jobs")

        await pilot.press("4")
        await pilot.pause()
        assert set(table(app, "instance-table").shown_keys) == {i.instance_id for i in snap.instances}
        assert "spot" in column(app, "instance-table", "market")

        await pilot.press("5")
        await pilot.pause()
        assert column(app, "budget-table", "name") == [b.budget.name for b in snap.budgets]
        assert any("%" in u for u in column(app, "budget-table", "used"))

        await pilot.press("1")
        assert app.active_pane == "overview"


async def test_tab_cycles_panes_and_q_quits():
    async with running() as (app, pilot):
        seen = []
        for _ in range(8):
            await pilot.press("tab")
            seen.append(app.active_pane)
        assert seen == ["gpus", "jobs", "instances", "budgets", "audit", "autopilot", "experiments", "services"]
        await pilot.press("tab")
        assert app.active_pane == "overview"
        await pilot.press("shift+tab")
        assert app.active_pane == "services"
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_every_pane_key_is_in_sight_at_80_columns():
    """Nine panes do not fit spaced out in 80 columns: the strip packs them, with short titles,
    and spreads out again when the terminal grows."""
    async with running() as (app, pilot):
        strip = app.screen.query_one("#pane-tabs")
        shown = strip._shown.plain
        assert shown.rstrip().endswith("8 Exps  9 Svc") and "7 Auto " in shown and len(shown.rstrip()) <= 80
        await pilot.resize_terminal(120, 30)
        await pilot.pause()
        assert "7 Autopilot   8 Exps   9 Services" in strip._shown.plain


async def test_filter_narrows_then_escape_restores():
    async with running() as (app, pilot):
        await pilot.press("2")
        await pilot.pause()
        everything = len(table(app, "gpu-table").shown_keys)
        await pilot.press("slash")
        field = app.query_one("#gpus-pane").query_one(FilterInput)
        assert field.has_focus
        await pilot.press(*"h100")
        await pilot.pause()
        keys = table(app, "gpu-table").shown_keys
        models = [m for k, m in zip(keys, column(app, "gpu-table", "model"), strict=True) if "/" not in k]
        assert models and all(m.startswith("H100") for m in models)  # GPU rows; their processes follow them
        assert "filter: h100" in pane_text(app, "gpus")
        # While typing, digits and letters go to the field, not to pane switching.
        assert app.active_pane == "gpus"
        await pilot.press("escape")
        await pilot.pause()
        assert len(table(app, "gpu-table").shown_keys) == everything
        assert not field.display


async def test_help_screen_lists_bindings():
    async with running() as (app, pilot):
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_gpu_detail_shows_history_sparklines(tmp_path):
    clock = FrozenClock()
    console = demo_console(db=tmp_path / "c.db", clock=clock)
    record_history(console, clock, 10)
    async with running(console) as (app, pilot):
        await pilot.press("2")
        await pilot.pause()
        first = table(app, "gpu-table").selected_key
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen)
        assert screen.uuid == first
        await wait_until(lambda: len(screen.query_one("#spark-util", Sparkline).data or []) >= 10)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, GpuDetailScreen)


async def test_theme_from_palette_and_t_key():
    async with running(theme="dark") as (app, pilot):
        assert app.theme == "gpuconsole-dark"
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Theme: light")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert app.theme == "gpuconsole-light"
        await pilot.press("t")
        assert app.theme != "gpuconsole-light"


async def test_palette_reaches_pane_actions():
    async with running() as (app, pilot):
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Show Budgets")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert app.active_pane == "budgets"


async def test_no_color_picks_the_plain_theme(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    console = demo_console()
    app = GpuConsoleApp(console)
    assert app.no_color
    assert app.theme == "gpuconsole-contrast"
    console.close()


async def test_no_color_draws_in_the_terminals_own_colours_not_black(monkeypatch):
    """Textual's Monochrome filter turns the terminal's default colours into black on black;
    under NO_COLOR the console strips colour and leaves the terminal's own."""
    from textual.filter import Monochrome, NoColor

    monkeypatch.setenv("NO_COLOR", "1")
    console = demo_console()
    app = GpuConsoleApp(console, theme_name="dark")  # even a colour theme asked for by name
    filters = app._filters
    assert any(isinstance(f, NoColor) for f in filters) and not any(isinstance(f, Monochrome) for f in filters)
    console.close()


async def test_without_backends_each_pane_says_what_is_missing_and_offers_demo():
    async with running(demo_console(demo=False), live=False) as (app, pilot):
        await wait_until(lambda: all(s.state is SourceState.UNCONFIGURED for s in app.snapshot.sources))
        await pilot.pause()
        assert not app.snapshot.gpus and not app.snapshot.jobs and not app.snapshot.instances
        overview = pane_text(app, "overview")
        assert "not set up" in overview and "simulated GPU cloud" in overview
        assert "0 busy" not in overview, "no made-up zeros where a source is missing"
        await pilot.press("2")
        await pilot.pause()
        text = pane_text(app, "gpus")
        assert "not set up" in text and "NVIDIA driver" in text and "D" in text
        await pilot.press("3")
        await pilot.pause()
        assert "KUBECONFIG" in pane_text(app, "jobs")
        await pilot.press("4")
        await pilot.pause()
        assert "AWS credentials" in pane_text(app, "instances")
        await pilot.press("d")
        await wait_until(lambda: all_live(app))
        await pilot.pause()
        assert app.snapshot.demo and app.snapshot.gpus
        assert table(app, "instance-table").shown_keys


async def test_failing_source_marked_and_ui_keeps_responding():
    console = demo_console(faults="gpus:error")
    async with running(console, live=False) as (app, pilot):
        await wait_until(lambda: (s := app.snapshot.source(SourceKind.GPUS)) is not None and s.state is SourceState.ERROR)
        await pilot.press("2")
        await pilot.pause()
        assert "error: simulated fault" in pane_text(app, "gpus")
        # Keys still work while the source fails.
        await pilot.press("3")
        assert app.active_pane == "jobs"
        plan = console.hub.runners[SourceKind.GPUS].source.sim.faults
        plan.set(SourceKind.GPUS, None)
        await wait_until(lambda: app.snapshot.source(SourceKind.GPUS).state is SourceState.LIVE)
        await pilot.press("2")
        await pilot.pause()
        assert "GPU telemetry: sim · live" in pane_text(app, "gpus")


async def test_hanging_source_goes_stale_and_keys_still_answer():
    console = demo_console(faults="jobs:hang", timeout=0.2)
    async with running(console, live=False) as (app, pilot):
        # never answered: still connecting, the seconds waited counting up (not "stale for 0 s")
        await wait_until(lambda: app.snapshot.source(SourceKind.JOBS).waiting_since is not None)
        assert app.snapshot.source(SourceKind.JOBS).state is SourceState.CONNECTING
        # the Overview's Jobs card waits in words: no "0 running · 0 pending" for what is unknown
        await wait_until(lambda: "waiting for a first answer" in shown(app.query_one("#card-jobs")))
        assert "0 running" not in shown(app.query_one("#card-jobs"))
        assert "no answer yet" in shown(app.query_one("#card-jobs"))
        for key, pane in (("3", "jobs"), ("2", "gpus"), ("4", "instances")):
            await pilot.press(key)
            assert app.active_pane == pane
        await pilot.press("3")
        await pilot.pause()
        assert "no answer yet" in pane_text(app, "jobs")
        console.hub.runners[SourceKind.JOBS].source.sim.faults.release()
        await wait_until(lambda: app.snapshot.source(SourceKind.JOBS).state is SourceState.LIVE)


async def test_mouse_click_on_a_pane_name_switches_to_it():
    async with running() as (app, pilot):
        strip = app.query_one("#pane-tabs")
        for start, _end, pane_id in strip._ranges:
            await pilot.click("#pane-tabs", offset=(start + 2, 0))
            await pilot.pause()
            assert app.active_pane == pane_id


async def test_palette_finds_a_job_and_shows_it():
    async with running() as (app, pilot):
        job = next(j for j in app.snapshot.jobs if j.name.startswith("llama-70b"))
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*f"Job {job.namespace}/{job.name}")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert app.active_pane == "jobs"
        assert column(app, "job-table", "name") == [job.name]


async def test_cache_database_opens_after_the_first_complete_frame(tmp_path):
    from gpuconsole.core.fleet.store import Store

    console = demo_console()
    console.cache.opener = lambda: Store(tmp_path / "cache.db")  # as `gpuconsole` builds it
    async with running(console) as (app, pilot):
        await wait_until(lambda: console.store is not None)
        uuid = app.snapshot.gpus[0].uuid
        console.clock.advance(1)
        await wait_until(lambda: bool(console.store.gpu_history(uuid, 0)))


def test_history_charts_have_a_floor_and_a_ceiling():
    """A 1 °C blip on a steady 60 °C draws as a blip, not as a bar from the bottom to the top."""
    from gpuconsole.model import Gpu
    from gpuconsole.ui.screens.gpu_detail import bars, chart_range

    gpu = Gpu("GPU-x", "node", 0, "H100", 50.0, 1000, 80000, 60, 300.0, 700.0)
    steady = bars([60.0] * 10 + [61.0], 40, *chart_range("temp", gpu))
    assert len(set(steady)) == 1 and "█" not in steady
    assert bars([0.0, 50.0, 100.0], 40, *chart_range("util", gpu)) == "▁▅█"
    assert bars([40000.0], 10, *chart_range("memory", gpu)) == "▅" and chart_range("power", gpu) == (0.0, 700.0)
    assert len(bars(list(map(float, range(500))), 40, 0.0, 500.0)) == 40  # long series: one bar a column


async def test_an_unticked_box_in_the_contrast_theme_shows_no_mark():
    """On 16 colours a dim white mark reads as ticked where a terminal has no dim: unticked, the
    mark is drawn in the background's colour; ticked, in the accent."""
    from textual.widgets import Checkbox

    from gpuconsole.ui.screens.budget_form import BudgetForm

    async with running(theme="contrast") as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        box = app.screen.query_one("#budget-automatic", Checkbox)
        box.value = False
        await pilot.pause()
        off = box.get_component_rich_style("toggle--button")
        assert off.color == off.bgcolor and not off.dim
        box.value = True
        await pilot.pause()
        on = box.get_component_rich_style("toggle--button")
        assert on.color != on.bgcolor and on.bold


def test_a_pane_asked_for_focus_before_it_has_composed_its_body_does_not_fail() -> None:
    """A pane key pressed the moment the pane is mounted reaches ``focus_body`` before the pane's
    tables exist (seen under load with the GPUs pane): it must wait quietly, never raise."""
    from gpuconsole.ui.registry import PANES, pane_class

    for spec in PANES:
        pane = pane_class(spec.id)(id=f"{spec.id}-pane")
        pane.focus_body()  # nothing composed yet: nothing to focus, and no NoMatches


async def test_a_filter_longer_than_its_field_scrolls_to_the_words_typed_last():
    """The field repaints as words are typed (no new layout of the screen) and still scrolls."""
    async with running() as (app, pilot):
        await pilot.press("2", "slash")
        field = app.query_one("#gpus-pane").query_one(FilterInput)
        words = "a-very-long-filter-that-does-not-fit-in-the-field-" * 2 + "tail"
        await pilot.press(*words)
        await pilot.pause()
        assert field.value == words and field.virtual_size.width > field.content_region.width
        assert field.scroll_x > 0
        shown = "".join(segment.text for segment in field.render_line(0))
        assert "tail" in shown
