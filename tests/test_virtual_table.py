"""The table that draws only the rows on screen: right rows, cursor kept on its key, at 100,000 rows."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from textual.app import App, ComposeResult

from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.row_index import RowIndex
from gpuconsole.ui.widgets.virtual_table import VirtualTable

COLUMNS = [("NAME", "name", 12), ("GPUS", "gpus", 4), ("REASON", "reason", None)]


@dataclass(frozen=True, slots=True)
class Item:
    uid: str
    name: str
    gpus: int
    reason: str = ""


def items(count: int) -> tuple[Item, ...]:
    return tuple(Item(f"u{n:06d}", f"train-{n:06d}", n % 8, "Insufficient nvidia.com/gpu" if n % 5 == 0 else "")
                 for n in range(count))


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.built: list[str] = []  # the keys whose cells were made
        self.selected: list[str | None] = []

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.selected.append(event.row_key)

    def compose(self) -> ComposeResult:
        yield VirtualTable(COLUMNS, id="t")

    def cells(self, index: RowIndex, key: str) -> tuple[object, ...]:
        self.built.append(key)
        item = index.by_key[key]
        return (text(item.name), right(item.gpus), text(item.reason))


def new_index() -> RowIndex:
    return RowIndex(lambda i: i.uid, lambda i: (-i.gpus, i.name), lambda i: (i.name, i.reason))


def test_row_index_filters_100k_rows_exactly() -> None:
    index = new_index()
    everything = items(100_000)
    index.update(everything)
    assert len(index.keys()) == 100_000
    ordered = [index.by_key[k] for k in index.keys()]
    assert ordered == sorted(everything, key=lambda i: (-i.gpus, i.name))
    # Every term must match, case-insensitively, anywhere in the row's words.
    got = index.keys("TRAIN-0999 insufficient")
    want = [i.uid for i in ordered if "train-0999" in i.name and i.reason]
    assert got == want and len(got) == 20
    assert index.keys("no-such-job") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="trai-n01 9xINS", max_size=8), min_size=1, max_size=12), st.booleans())
def test_typing_narrows_to_exactly_what_a_full_scan_finds(texts: list[str], descending: bool) -> None:
    """A text that extends the last one is tested against the last answer only, and the same
    text asked again is not tested at all; every answer is still the one a scan of every row
    gives, whatever is typed, deleted or typed again, in either direction of the sort."""
    index = new_index()
    if descending:
        index.set_order(lambda i: (0, i.gpus, i.name), descending=True)
    everything = items(2_000)
    index.update(everything)
    ordered = [index.by_key[k] for k in index.keys()]
    typed = ""
    for piece in texts:
        typed = (typed + piece) if len(piece) % 3 else piece  # mostly extend, sometimes start over
        terms = typed.lower().split()
        want = [i.uid for i in ordered if all(t in f"{i.name} {i.reason}".lower() for t in terms)]
        assert index.keys(typed) == want
        assert index.keys(typed) == want  # asked again (the next frame)
    index.update(items(1_000))  # a new snapshot: the last answer is not reused
    assert index.keys(typed) == [k for k in index.keys() if all(
        t in f"{index.by_key[k].name} {index.by_key[k].reason}".lower() for t in typed.lower().split())]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 399), st.integers(0, 7), st.booleans()), max_size=60),
       st.integers(0, 3))
def test_a_reading_that_changes_a_few_rows_is_ordered_as_a_full_sort_would(edits: list[tuple[int, int, bool]],
                                                                            rounds: int) -> None:
    """Few changes are merged into the last order, many are sorted afresh: the same rows either way."""
    index = new_index()
    current = {i.uid: i for i in items(400)}
    index.update(tuple(current.values()))
    for r in range(rounds + 1):
        for n, gpus, remove in edits[r::rounds + 1]:
            uid = f"u{n:06d}"
            if remove:
                current.pop(uid, None)
            else:
                current[uid] = Item(uid, f"train-{n:06d}", gpus, "moved" if gpus % 2 else "")
        reading = tuple(current.values())
        index.update(reading)
        assert index.ordered == sorted(reading, key=lambda i: (-i.gpus, i.name))
        assert index.keys("moved") == [i.uid for i in index.ordered if i.reason == "moved"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "remove", "replace", "same"]), st.integers(0, 10_000),
                          st.integers(0, 7)), max_size=40), st.integers(1, 4))
def test_a_reading_in_a_new_tuple_is_indexed_as_a_fresh_index_would(edits: list[tuple[str, int, int]],
                                                                     rounds: int) -> None:
    """Each reading is a new tuple: rows inserted, removed or replaced anywhere (a live job
    placed before a long history shifts every row after it), or the very same objects. Only
    what lies between the unchanged head and tail is looked at, and the index is the one a
    fresh index of the reading would be."""
    index = new_index()
    reading = list(items(300))
    index.update(tuple(reading))
    serial = 1000
    for r in range(rounds):
        for op, at, gpus in edits[r::rounds]:
            at %= len(reading) + 1
            if op == "insert":
                serial += 1
                reading.insert(at, Item(f"u{serial:06d}", f"new-{serial}", gpus, "placed"))
            elif reading and at < len(reading) and op == "remove":
                del reading[at]
            elif reading and at < len(reading) and op == "replace":
                old = reading[at]
                reading[at] = Item(old.uid, old.name, gpus, "placed")
        index.update(tuple(reading))
        fresh = new_index()
        fresh.update(tuple(reading))
        assert index.by_key == fresh.by_key and index.keys() == fresh.keys()
        assert index.keys("placed") == fresh.keys("placed")


def test_row_index_reuses_the_words_of_unchanged_items() -> None:
    index = new_index()
    first = items(10)
    index.update(first)
    changed = (*first[:9], Item("u000009", "renamed", 1))
    index.update(changed)
    assert index.keys("renamed") == ["u000009"]
    assert index.keys("train-000009") == []
    assert index.by_key["u000000"] is first[0]


def test_the_widest_name_is_counted_once_then_over_what_each_reading_brings() -> None:
    index = new_index()
    first = items(100)
    index.update(first)
    seen: list[str] = []

    def width(item: Item) -> int:
        seen.append(item.uid)
        return len(item.name)

    assert index.widest(width) == max(len(i.name) for i in first) and len(seen) == 100
    longer = (*first[:99], Item("u000099", "a-much-longer-name-than-any-other", 1))
    index.update(longer)
    seen.clear()
    assert index.widest(width) == len("a-much-longer-name-than-any-other")
    assert seen == ["u000099"], "only the item the reading changed is measured"
    assert index.widest(width) == len("a-much-longer-name-than-any-other") and seen == ["u000099"]
    # Two readings before the next frame, and one of the very same objects: what both brought.
    second = (Item("u000000", "renamed-0", 1), *longer[1:])
    index.update(second)
    index.update((*second[:50], Item("u000050", "renamed-50", 1), *second[51:]))
    index.update(tuple(index.by_key[i.uid] for i in second[:50]) + (index.by_key["u000050"], *second[51:]))
    seen.clear()
    assert index.widest(width) == len("a-much-longer-name-than-any-other") and seen == ["u000000", "u000050"]


async def test_only_the_rows_on_screen_are_built_and_the_cursor_keeps_its_key() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(VirtualTable)
        index = new_index()
        index.update(items(100_000))
        table.show_rows(index.keys(), lambda key: app.cells(index, key))
        await pilot.pause()
        assert table.row_count == 100_000
        # One screen (11 rows under the header), not 100,000.
        assert 0 < len(set(app.built)) <= 11
        table.focus()
        await pilot.press("pagedown", "down")
        await pilot.pause()
        chosen = table.selected_key
        assert chosen == index.keys()[table.cursor_row] and table.cursor_row > 10
        # A filter that keeps the chosen row moves the cursor with it.
        name = index.by_key[chosen].name
        table.show_rows(index.keys(name[:-1]), lambda key: app.cells(index, key))
        await pilot.pause()
        assert table.selected_key == chosen
        assert str(table.get_cell(chosen, "name")) == name
        await pilot.press("end")
        assert table.selected_key == table.shown_keys[-1]
        await pilot.press("home")
        assert table.cursor_row == 0
        assert len(set(app.built)) < 100


async def test_enter_and_a_click_select_a_row() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(VirtualTable)
        table.sync([(f"k{n}", (text(f"row {n}"), right(n), text(""))) for n in range(30)])
        table.focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert table.selected_key == "k2" and app.selected == ["k2"]
        await pilot.click(VirtualTable, offset=(3, 5))  # the header is line 0: line 5 is row 4
        await pilot.pause()
        assert table.selected_key == "k4"
        await pilot.click(VirtualTable, offset=(3, 5), times=2)
        await pilot.pause()
        assert app.selected == ["k2", "k4"]
        assert str(table.get_cell("k4", "name")) == "row 4"


async def test_a_filter_keeps_the_scroll_range_and_scrollbar_true_to_the_rows() -> None:
    """Fewer rows that still overflow update the scroll range and scrollbar in place; rows that
    fit on screen hide the scrollbar, and more rows bring it back."""
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(VirtualTable)
        rows = [(f"k{n}", (text(f"row {n}"), right(n), text(""))) for n in range(500)]
        table.sync(rows)
        await pilot.pause()
        assert table.show_vertical_scrollbar and table.vertical_scrollbar.window_virtual_size == 501
        table.focus()
        for count, overflows in ((200, True), (40, True), (5, False), (300, True)):
            table.sync(rows[:count])
            await pilot.pause()
            assert table.virtual_size.height == count + 1
            assert table.show_vertical_scrollbar is overflows
            if overflows:
                assert table.vertical_scrollbar.window_virtual_size == count + 1
            await pilot.press("end")
            await pilot.pause()
            assert table.selected_key == f"k{count - 1}"
            assert table.scroll_y == table.max_scroll_y == max(0, count + 1 - table.scrollable_content_region.height)
            await pilot.press("home")
            await pilot.pause()
