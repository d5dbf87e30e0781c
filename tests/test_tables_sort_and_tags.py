"""Every table sorts by any column (F6, > and <, marked in the header), tags rows with space,
and acts on every tagged row in one confirmation that lists each with its $/h; names are
never cut while another column can give."""

from __future__ import annotations

from textual.widgets import Input, Static

from gpuconsole.model import InstanceState, JobState
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.widgets.columns import column_widths
from gpuconsole.ui.widgets.sorting import cell_order, ordered
from tests.driving import column, running, show_pane, table
from tests.helpers import wait_until


def test_cells_sort_as_the_figures_they_show():
    cells = ["$1,234.50", "$99.00", "-", "$5.10", "N/A"]
    keys = [str(i) for i in range(len(cells))]
    assert [cells[int(k)] for k in ordered(keys, lambda k: cell_order(cells[int(k)]), True)] == [
        "$1,234.50", "$99.00", "$5.10", "-", "N/A"]  # unknown last, whichever the direction
    assert [cells[int(k)] for k in ordered(keys, lambda k: cell_order(cells[int(k)]), False)][:3] == [
        "$5.10", "$99.00", "$1,234.50"]
    ages = ["4m", "2h01m", "13m", "3d5h"]
    assert sorted(ages, key=cell_order) == ["4m", "13m", "2h01m", "3d5h"]
    assert cell_order("██▌   64%") == (0, 64.0) and cell_order("unknown") is None


def test_the_name_column_takes_room_from_the_others_before_it_is_cut():
    spec = [("STATE", "state", 9), ("NAME", "name", 22), ("NODE", "node", 14), ("REASON", "reason", None)]
    # at 200 columns a 40-character name is shown whole, the reason takes what is left
    wide = column_widths(spec, 200 - 8, {}, "name", 40, {"node": 8})
    assert wide[1] == 40 and sum(wide) == 192
    # at 80 the reason gives its room first
    assert column_widths(spec, 80 - 8, {}, "name", 40, {"node": 8}) == [9, 40, 14, 9]
    # narrower still: the node gives too; the name is never cut (the table scrolls instead)
    assert column_widths(spec, 60, {}, "name", 40, {"node": 8}) == [9, 40, 8, len("REASON") + 1]


async def test_jobs_sort_by_any_column_and_say_so_in_the_header():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        jobs = table(app, "job-table")
        for _ in range(6):  # state, kind, name, gpus, node, age
            await pilot.press("greater_than_sign")
        await pilot.pause()
        assert jobs.sort_column == "age" and jobs.column_label("age") == "AGE▼"
        by_uid = app.snapshot.jobs
        created = {j.uid: j.created for j in by_uid}
        order = [created[k] for k in jobs.shown_keys if k in created]  # a distributed job's roles go with it
        assert order == sorted(order)  # oldest (largest age) first
        await pilot.press("f6")
        await wait_until(lambda: type(app.screen).__name__ == "SortMenu" and app.screen.is_mounted)
        await pilot.press("end", "enter")  # reverse
        await wait_until(lambda: type(app.screen).__name__ != "SortMenu")
        await pilot.pause()
        assert jobs.column_label("age") == "AGE▲"
        order = [created[k] for k in jobs.shown_keys if k in created]
        assert order == sorted(order, reverse=True)
        # the CronJobs table sorts by what its cells say
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("f6")
        await wait_until(lambda: type(app.screen).__name__ == "SortMenu" and app.screen.is_mounted)
        await pilot.press("down", "enter")  # NAMESPACE
        await wait_until(lambda: type(app.screen).__name__ != "SortMenu")
        await pilot.pause()
        spaces = column(app, "cron-table", "namespace")
        assert spaces == sorted(spaces) and table(app, "cron-table").column_label("namespace") == "NAMESPACE▲"


async def test_instances_sort_by_price_from_the_cells():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        t = table(app, "instance-table")
        t.sort_by("price")
        await pilot.pause()
        prices = [float(p) for p in column(app, "instance-table", "price")]
        assert prices == sorted(prices, reverse=True) and t.column_label("price") == "$/H▼"


async def test_tagged_instances_stop_together_after_one_confirmation_listing_each():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        t = table(app, "instance-table")
        running_ids = [i.instance_id for i in app.snapshot.instances
                       if i.state is InstanceState.RUNNING and i.market.value == "on-demand"][:2]
        assert len(running_ids) == 2
        for target in running_ids:
            t.move_cursor(row=t.shown_keys.index(target))
            await pilot.press("space")
        await pilot.pause()
        assert t.tagged == set(running_ids)
        assert "2 tagged" in str(app.current_pane.query_one(".source-line", Static).content)
        await pilot.press("s")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        listing = str(app.screen.query_one("#confirm-target-lines", Static).content)
        for target in running_ids:
            price = next(i.price_per_hour for i in app.snapshot.instances if i.instance_id == target)
            line = next(line for line in listing.splitlines() if target in line)
            assert f"${price:,.2f}/h" in line
        assert "2 instances" in str(app.screen.query_one("#confirm-total", Static).content)
        await pilot.press("y")

        def stopped() -> bool:
            states = {i.instance_id: i.state for i in app.snapshot.instances}
            return all(states[t] in (InstanceState.STOPPING, InstanceState.STOPPED) for t in running_ids)

        await wait_until(stopped)
        made = [r for r in app.core.services.actions.recent() if r.ok]
        assert {r.request.target for r in made} == set(running_ids)
        await wait_until(lambda: not t.tagged)  # done: the tags go


async def test_tagged_terminate_wants_the_count_typed_and_the_core_checks_each():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        t = table(app, "instance-table")
        ids = [i.instance_id for i in app.snapshot.instances if i.state is InstanceState.RUNNING][:3]
        for target in ids:
            t.move_cursor(row=t.shown_keys.index(target))
            await pilot.press("space")
        await pilot.press("x")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        assert isinstance(app.focused, Input)
        await pilot.press(*"yes", "enter")  # not the words asked for: nothing happens
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.core.services.actions.recent() == ()
        app.screen.query_one(Input).value = "terminate 3"
        await pilot.press("enter")
        await wait_until(lambda: len(app.core.services.actions.recent()) == 3)
        assert {r.request.confirmation for r in app.core.services.actions.recent()} == set(ids)


async def test_tagged_jobs_delete_in_one_confirmation_and_space_untags():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        t = table(app, "job-table")
        running_jobs = [j for j in app.snapshot.jobs if j.state is JobState.RUNNING][:2]
        t.move_cursor(row=t.shown_keys.index(running_jobs[0].uid))
        await pilot.press("space")
        await pilot.pause()
        t.move_cursor(row=t.shown_keys.index(running_jobs[0].uid))
        await pilot.press("space")  # a second space untags
        assert not t.tagged
        for job in running_jobs:
            t.move_cursor(row=t.shown_keys.index(job.uid))
            await pilot.press("space")
        await pilot.press("ctrl+d")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        listing = str(app.screen.query_one("#confirm-target-lines", Static).content)
        assert all(f"{j.namespace}/{j.name}" in listing for j in running_jobs)
        assert listing.count("/h") == 2  # each with what its GPUs cost per hour
        await pilot.press("y")
        names = {j.name for j in running_jobs}
        await wait_until(lambda: not names & {j.name for j in app.snapshot.jobs})


async def test_escape_clears_the_tags():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        await pilot.press("space", "space")
        t = table(app, "instance-table")
        assert len(t.tagged) == 2
        await pilot.press("escape")
        await pilot.pause()
        assert not t.tagged


async def test_a_delete_while_the_jobs_source_hangs_says_the_table_shows_its_last_answer():
    from gpuconsole.model import SourceKind, SourceState
    from tests.helpers import demo_console

    console = demo_console(timeout=0.2)
    async with running(console) as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        faults = console.hub.runners[SourceKind.JOBS].source.sim.faults
        faults.set(SourceKind.JOBS, "hang")
        try:
            await wait_until(lambda: app.snapshot.source(SourceKind.JOBS).state is SourceState.STALE)
            t = table(app, "job-table")
            job = next(j for j in app.snapshot.jobs if j.state is JobState.RUNNING)
            t.move_cursor(row=t.shown_keys.index(job.uid))
            await pilot.press("ctrl+d")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.pause()
            await pilot.press("y")
            await wait_until(lambda: any("last answer" in n.message for n in app._notifications))
            said = next(n.message for n in app._notifications if "last answer" in n.message)
            assert job.name in said and "stale for" in said
            assert job.uid in t.shown_keys  # still listed: the source has not answered since
        finally:
            faults.release()


async def test_the_footer_drops_whole_entries_at_80_columns_and_keeps_the_help_key():
    from gpuconsole.ui.widgets.footer import KeyFooter, is_key

    async with running() as (app, pilot):
        for key, pane in (("3", "jobs"), ("4", "instances"), ("2", "gpus"), ("5", "budgets")):
            await show_pane(app, pilot, key, pane)
            footer = app.screen.query_one(KeyFooter)
            await pilot.pause()
            entries = [w for w in footer.children if is_key(w)]
            palette = next(w for w in entries if w.has_class("-command-palette"))
            keys = [w for w in entries if w is not palette]
            assert keys and all(w.region.right <= palette.region.x for w in keys), pane
            assert any(w.action == "help" for w in keys), pane


async def test_the_footer_is_rebuilt_only_when_what_it_shows_changes():
    """Bindings announced again with nothing changed leave the footer's entries as they are (a
    pane switch announces them several times); a pane with other keys gets its own line."""
    from gpuconsole.ui.widgets.footer import KeyFooter, is_key

    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        await pilot.pause()
        footer = app.screen.query_one(KeyFooter)
        before = list(footer.children)
        for _ in range(3):
            app.screen.refresh_bindings()
            await pilot.pause()
        assert list(footer.children) == before
        assert all(not w.has_class("-compact") for w in before if is_key(w) and not w.has_class("-command-palette"))
        await show_pane(app, pilot, "3", "jobs")
        await pilot.pause()
        await wait_until(lambda: any(is_key(w) and w.description == "CronJobs" for w in footer.children))


async def test_notifications_never_cover_the_lines_that_say_what_is_selected():
    async with running(notifications=True) as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        await pilot.press("r")  # "Polling every source now."
        await wait_until(lambda: bool(app.screen.query("Toast")))
        await pilot.pause()
        toast = app.screen.query_one("Toast").region
        pane = app.current_pane
        for line in (".source-line", ".row-detail"):
            region = pane.query_one(line).region
            assert not toast.overlaps(region), line
        assert not toast.overlaps(app.screen.query_one("KeyFooter").region)


async def test_one_theme_system_in_the_palette():
    """Textual's own theme picker is gone: themes come from themes/ (t, and "Theme: …")."""
    from gpuconsole.ui.commands import ConsoleCommands

    async with running() as (app, pilot):
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert "Theme" not in titles and "Quit" in titles
        assert any(name.startswith("Theme: ") for name, *_ in ConsoleCommands(app.screen).commands())
