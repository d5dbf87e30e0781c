"""The UI's house rules: a worker's unexpected error is one line on screen, a pane is declared
once, every change goes through the one action runner, private Textual names stay fenced."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from importlib.metadata import version

import pytest
from textual.message_pump import MessagePump

import gpuconsole.ui
from gpuconsole.ui import typeahead
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.registry import PANES, pane_class
from gpuconsole.ui.worker_errors import ReportsWorkerErrors
from tests.helpers import wait_until
from tests.driving import running

UI = Path(gpuconsole.ui.__file__).parent
PRODUCT = UI.parent


def notices(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def ui_modules():
    for info in pkgutil.walk_packages([str(UI)], "gpuconsole.ui."):
        yield importlib.import_module(info.name)


# ---------------------------------------------------------------------- worker errors
def boom() -> None:
    raise RuntimeError("the planted failure\nwith a second line nobody should see")


@pytest.mark.asyncio
async def test_a_worker_that_raises_in_a_pane_is_one_line_on_screen_and_in_the_log(caplog):
    async with running() as (app, pilot):
        pane = app.current_pane
        pane.run_worker(boom, thread=True, exit_on_error=False, description="planted work")
        await wait_until(lambda: any("planted work failed" in n for n in notices(app)))
        line = next(n for n in notices(app) if "planted work failed" in n)
        assert line == "planted work failed: RuntimeError: the planted failure"
        assert app.is_running  # the app goes on
    assert any("planted work failed" in r.getMessage() and r.exc_info for r in caplog.records)


@pytest.mark.asyncio
async def test_an_action_whose_core_call_raises_something_unexpected_is_said_not_lost(monkeypatch):
    async with running() as (app, pilot):
        await pilot.press("3")
        await wait_until(lambda: app.current_pane is not None and app.current_pane.selected() is not None)
        jobs = app.core.services.jobs

        def broken(*_args, **_kwargs):
            raise KeyError("no such field in the answer")

        monkeypatch.setattr(type(jobs), "trigger", broken, raising=False)
        monkeypatch.setattr(type(jobs), "resume", broken, raising=False)
        from gpuconsole.ui.actions import Action, run_action

        run_action(app.current_pane, Action("run CronJob demo/nightly", lambda _: jobs.trigger("demo", "nightly")))
        await wait_until(lambda: any("run CronJob demo/nightly failed: KeyError" in n for n in notices(app)))


@pytest.mark.asyncio
async def test_a_worker_on_a_screen_and_on_the_app_is_reported_too():
    from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen

    async with running() as (app, pilot):
        app.run_worker(boom, thread=True, exit_on_error=False, description="app work")
        await wait_until(lambda: any("app work failed" in n for n in notices(app)))
        app.open_gpu(app.snapshot.gpus[0].uuid)
        await wait_until(lambda: isinstance(app.screen, GpuDetailScreen) and app.screen.is_mounted)
        app.screen.run_worker(boom, thread=True, exit_on_error=False, description="screen work")
        await wait_until(lambda: any("screen work failed" in n for n in notices(app)))


def test_every_ui_class_that_runs_a_worker_reports_its_errors():
    runs_workers = []
    for module in ui_modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            source = inspect.getsource(cls)
            if "@work(" in source or "run_worker(" in source or "run_action(" in source:
                runs_workers.append(cls)
                assert issubclass(cls, ReportsWorkerErrors), f"{cls.__qualname__} runs workers without the handler"
    assert len(runs_workers) > 10


# ---------------------------------------------------------------------- one action runner
def test_only_the_action_runner_pushes_a_confirmation_or_asks_for_mfa():
    pushers = []
    for path in UI.rglob("*.py"):
        text = path.read_text()
        if "ConfirmScreen(" in text and path.name not in {"actions.py", "confirm.py"}:
            pushers.append(path.name)
        if re.search(r"MfaPrompt\(\w+\.kind|MfaPrompt\(kind", text) and path.name not in {"actions.py", "mfa_prompt.py"}:
            pushers.append(path.name)
    assert pushers == []


# ---------------------------------------------------------------------- one pane declaration
def test_every_pane_is_built_from_its_one_declaration():
    keys = {b.key: b.action for b in GpuConsoleApp.BINDINGS}
    for spec in PANES:
        cls = pane_class(spec.id)
        assert cls.__module__ == spec.cls.partition(":")[0]
        assert keys[spec.key] == f"show_pane('{spec.id}')"
        assert spec.css_path in GpuConsoleApp.CSS_PATH and (UI / spec.css_path).is_file()
    assert len({spec.key for spec in PANES}) == len(PANES) == len({spec.id for spec in PANES})
    # the screens load their own stylesheets: the app names only its own and the panes'
    assert GpuConsoleApp.CSS_PATH == ["app.tcss", *(spec.css_path for spec in PANES)]


@pytest.mark.asyncio
async def test_the_strip_the_help_and_the_palette_name_every_declared_pane():
    from gpuconsole.ui.screens.help import APP_WORDS

    async with running() as (app, pilot):
        strip = app.query_one("#pane-tabs").content.plain
        for spec in PANES:
            assert f"{spec.key} {spec.short_title}" in strip or f"{spec.key} {spec.tab_title}" in strip
            assert spec.short_title in APP_WORDS["show_pane"]
        for spec in PANES:
            await pilot.press(spec.key)
            await wait_until(lambda spec=spec: app.active_pane == spec.id and app.current_pane is not None)


def test_no_pane_is_found_by_its_class_name():
    """The app and the help build panes from the declaration, not from a naming convention."""
    for path in UI.rglob("*.py"):
        assert "capitalize()}Pane" not in path.read_text(), path


# ---------------------------------------------------------------------- fenced internals
PRIVATE_TEXTUAL = [
    r"\._message_queue\b", r"\b_next_callbacks\b", r"\btextual\._", r"textual(\.\w+)*\._\w",
    r"\b_get_terminal_size\b", r"\._data\b", r"\._update_count\b", r"\._row_locations\b", r"\bssl\._ssl\b",
]


def test_no_private_textual_name_outside_the_type_ahead_fence():
    found = []
    for path in PRODUCT.rglob("*.py"):
        if path == Path(typeahead.__file__):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for pattern in PRIVATE_TEXTUAL:
                if re.search(pattern, line):
                    found.append(f"{path.relative_to(PRODUCT)}:{number}: {line.strip()}")
    assert found == []


def test_the_fence_names_the_textual_version_it_was_checked_against_and_its_assumptions_hold():
    """The type-ahead gate reads two private names: a node's pending callbacks and the escape
    sequence table. Checked against Textual 8.2.8; a Textual that changed them fails here, not in
    a user's burst of keys."""
    assert typeahead.CHECKED_WITH_TEXTUAL == "8.2.8"
    checked = tuple(int(p) for p in typeahead.CHECKED_WITH_TEXTUAL.split("."))[:1]
    installed = tuple(int(p) for p in re.findall(r"\d+", version("textual"))[:1])
    assert installed == checked, f"the fence was checked with Textual {typeahead.CHECKED_WITH_TEXTUAL}"
    node = MessagePump()
    assert isinstance(node._next_callbacks, list) and node.message_queue_size == 0
    assert typeahead.busy(node) is False
    node.call_next(lambda: None)
    assert typeahead.busy(node) is True
    tree = ast.parse(Path(typeahead.__file__).read_text())
    private = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
               and not (isinstance(n.value, ast.Name) and n.value.id == "self")}
    assert private == {"_next_callbacks"}
    # and the escape sequence table, from which the Option-digit glyphs were dropped
    from textual import _ansi_sequences

    assert isinstance(_ansi_sequences.ANSI_SEQUENCES_KEYS, dict)
    assert not set(typeahead.OPTION_GLYPHS) & set(_ansi_sequences.ANSI_SEQUENCES_KEYS)
