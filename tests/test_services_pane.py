"""The Services pane and the service view, driven like a user at 80×24 on the seeded demo's
inference pool: rows grouped by namespace by $/h, the line under the table, unknown figures as
"–", the view's charts, replicas and events, and a scale that a burst of keys never confirms."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widgets import Input, Static

from gpuconsole.model import Service, ServiceKind, ServiceSlo
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.service_view import ServiceScreen
from gpuconsole.ui.panes.services import HEADER, service_cells
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.describe import DescribeScreen
from gpuconsole.ui.screens.gpu_detail import ScaledSparkline
from gpuconsole.ui.screens.logs import LogScreen
from gpuconsole.ui.screens.scale_prompt import ScalePrompt
from gpuconsole.ui import service_words as words
from gpuconsole.ui.widgets.live_table import LiveTable
from tests.driving import burst, pane_text, running, settle, shown, show_pane, table
from tests.helpers import demo_console, wait_until
from tests.test_wizard import move_to

LLM = "chat/vllm-llama3"


def scales(app) -> list:
    return [a for a in app.core.services.actions.recent() if a.request.kind.value == "scale-service"]


def detail(app) -> str:
    return shown(app.query_one("#services-pane .row-detail", Static))


async def services_pane(app, pilot):
    await show_pane(app, pilot, "9", "services")
    await wait_until(lambda: LLM in table(app, "service-table").shown_keys)
    services = table(app, "service-table")
    services.focus()
    await pilot.pause()
    return services


async def test_rows_are_grouped_by_namespace_by_cost_and_unknown_figures_are_a_dash():
    async with running() as (app, pilot):
        services = await services_pane(app, pilot)
        keys = services.shown_keys
        # each namespace's header, then its services; the costliest namespace first
        assert keys[:2] == [f"{HEADER}chat", LLM]
        headers = [k for k in keys if k.startswith(HEADER)]
        assert len(headers) == 5 and keys.index(f"{HEADER}research") < keys.index("research/notebook-llm")
        per_hour = [s.usd_per_hour for s in app.snapshot.services]
        assert per_hour == sorted(per_hour, reverse=True)  # one service a namespace in the demo
        # the cursor starts on the first service, and the line under the table spells it out
        assert services.selected_key == LLM
        llm = next(s for s in app.snapshot.services if s.key == LLM)
        line = detail(app)
        assert line.startswith("vllm-llama3 in ns chat: 3/3 ready on 6 H100, p99 ")
        assert f"{words.rate(llm.tokens_per_s)} tok/s" in line and line.endswith(f"${llm.usd_per_hour:,.2f}/h")
        assert "per 1M tokens" in line
        # the idle notebook server: no figures (–, never 0), and how to expose them
        await move_to(pilot, services, "research/notebook-llm")
        for column in ("rps", "p99", "tokens", "per_million"):
            assert str(services.get_cell("research/notebook-llm", column)) == "–"
        assert str(services.get_cell("research/notebook-llm", "per_hour")).startswith("$")
        assert "no serving metrics" in detail(app) and "[[services.metrics]]" in detail(app)
        # a namespace's row holds no service: enter says so
        await move_to(pilot, services, f"{HEADER}research")
        assert detail(app).startswith("namespace research: 1 service")
        assert "5 services in 5 namespaces" in pane_text(app, "services")


async def test_an_slo_is_judged_in_the_line_under_the_table(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('[[services.slo]]\nservice = "chat/vllm-llama3"\np99_ms = 300\n\n'
                      '[[services.slo]]\nservice = "search/text-embed"\np99_ms = 250\n', encoding="utf-8")
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(config))
    async with running(demo_console()) as (app, pilot):
        services = await services_pane(app, pilot)
        assert "(SLO 300 ms ✗)" in detail(app)  # the demo's LLM answers in seconds
        assert str(services.get_cell(LLM, "slo")) == "✗"
        await move_to(pilot, services, "search/text-embed")
        assert "(SLO 250 ms ✓)" in detail(app)
        assert str(services.get_cell("imaging/ct-imaging", "slo")) == "–"


def test_names_from_data_are_inert_in_the_cells_and_the_line():
    hostile = Service(namespace="ns\x1b[2J", name="evil\x1b]52;c;cHduZWQ=\x07", kind=ServiceKind.DEPLOYMENT,
                      image="img\x1b[31m", metrics_source="vllm", p99_ms=212.0, tokens_per_s=1840.0,
                      usd_per_hour=58.98, usd_per_million_tokens=0.94, replicas_desired=4, replicas_ready=4,
                      gpus=8.0, gpus_per_replica=2.0, gpu_model="NVIDIA H100 80GB HBM3",
                      slo=ServiceSlo(p99_ms=300.0, met=True))
    cells = service_cells(hostile, Palette(*(Style() for _ in range(6))))
    assert all("\x1b" not in cell.plain and "\x07" not in cell.plain for cell in cells if isinstance(cell, Text))
    assert cells[0].plain.startswith("evil\\x1b]52")
    assert words.summary(hostile).endswith(
        "4/4 ready on 8 H100, p99 212 ms (SLO 300 ms ✓), 1,840 tok/s, $0.94 per 1M tokens, $58.98/h")


async def test_the_service_view_charts_the_last_hour_lists_replicas_and_events():
    async with running() as (app, pilot):
        await services_pane(app, pilot)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, ServiceScreen))
        view = app.screen
        await wait_until(lambda: view.history and view.events)
        assert not view.history_error
        for figure in ("rps", "p99_ms", "tokens_per_s", "gpu_util"):
            assert len(view.history[figure]) > 10, figure
            assert view.query_one(f"#spark-{figure}", ScaledSparkline).data
        llm = view.current()
        replicas = view.query_one("#replica-table", LiveTable)
        assert replicas.shown_keys == [r.pod for r in llm.replicas]
        assert str(replicas.get_cell(llm.replicas[0].pod, "state")) == "ready"
        facts = shown(view.query_one("#service-facts", Static))
        assert "HPA vllm-llama3: 2–4 replicas" in facts and "figures (vllm)" in facts
        assert view.events.startswith("Events:")
        # l: the selected replica's log, through the log screen the jobs use
        await pilot.press("down", "l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        assert app.screen.pod == llm.replicas[1].pod
        await wait_until(lambda: app.screen.state != "loading")
        await pilot.press("escape")
        await wait_until(lambda: app.screen is view)
        # D: describe, through the describe screen the jobs use
        await pilot.press("D")
        await wait_until(lambda: isinstance(app.screen, DescribeScreen) and app.screen.text)
        assert "vllm-llama3" in app.screen.text
        await pilot.press("escape")
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, ServiceScreen | DescribeScreen))


async def test_a_bad_replica_count_is_one_line_and_keeps_what_was_typed():
    async with running() as (app, pilot):
        await services_pane(app, pilot)
        await pilot.press("s")
        await wait_until(lambda: isinstance(app.screen, ScalePrompt))
        prompt = app.screen
        await pilot.press(*"1o", "enter")
        error = shown(prompt.query_one("#scale-error", Static))
        assert error == "replicas must be a whole number from 0 to 1000, not '1o'"
        assert prompt.query_one(Input).value == "1o" and app.screen is prompt
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, ScalePrompt))
        assert scales(app) == []


async def test_a_burst_of_keys_never_confirms_a_scale_and_a_y_pressed_with_it_on_screen_does():
    async with running() as (app, pilot):
        await services_pane(app, pilot)
        burst(app, "s", "4", "enter", "y", "y")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.3)
        assert isinstance(app.screen, ConfirmScreen), "the y answered the question before it was shown"
        assert scales(app) == []
        box = shown(app.screen.query_one("#confirm-details", Static))
        assert "3 → 4 replicas (+2 H100)" in box and "about +$" in box and "HPA vllm-llama3" in box
        await pilot.press("y")
        await wait_until(lambda: scales(app))
        result = scales(app)[-1]
        assert result.ok and result.message == "scaled Deployment chat/vllm-llama3 to 4 replicas"
        assert ("replicas", "4") in result.request.params and ("from", "3") in result.request.params
        await wait_until(lambda: next(s for s in app.snapshot.services if s.key == LLM).replicas_desired == 4)


async def test_rollout_restart_asks_first_then_runs_through_the_action_path():
    async with running() as (app, pilot):
        await services_pane(app, pilot)
        await pilot.press("R")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(lambda: any(a.request.kind.value == "restart-service"
                                     for a in app.core.services.actions.recent()))
        restart = [a for a in app.core.services.actions.recent() if a.request.kind.value == "restart-service"][-1]
        assert restart.ok and restart.request.target == LLM


async def test_a_developer_scales_in_their_namespace_and_is_told_why_not_elsewhere(tmp_path):
    from gpuconsole.core.access.access import Role
    from tests.test_access_ui import access_line, console_app, select_row

    async with console_app(tmp_path, Role.DEVELOPER) as (app, pilot, _secret):
        audit = app.core.services.guard.audit
        await select_row(app, pilot, "9", "service-table", "research/notebook-llm")
        pane = app.query_one("#services-pane")
        assert pane.check_action("scale", ()) is None and pane.check_action("restart", ()) is None
        keys, _, why = access_line(app, "services").partition(" — ")
        assert "s" in keys.split() and "R" in keys.split()
        assert why == "developer dev may act only in namespace(s) team-nlp, chat, not in namespace research"
        before = len(audit.records())
        await pilot.press("s")
        await pilot.pause()
        assert not isinstance(app.screen, ScalePrompt) and len(audit.records()) == before
        # in their own namespace: asked, confirmed, scaled and audited under their name
        await select_row(app, pilot, "9", "service-table", LLM)
        assert pane.check_action("scale", ()) is True
        await pilot.press("s")
        await wait_until(lambda: isinstance(app.screen, ScalePrompt))
        await pilot.press("2", "enter")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(lambda: any(r.action == "scale-service" and r.result != "started" for r in audit.records()))
        last = [r for r in audit.records() if r.action == "scale-service" and r.result != "started"][-1]
        assert (last.actor, last.role, last.target, last.result) == ("dev", "developer", LLM, "ok")


async def test_the_palette_opens_a_service_by_name():
    async with running() as (app, pilot):
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Service research/notebook")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, ServiceScreen))
        assert app.active_pane == "services" and app.screen.key == "research/notebook-llm"
        await wait_until(lambda: app.screen.history_error or app.screen.history)
        assert "no serving metrics" in shown(app.screen.query_one("#service-facts", Static))
