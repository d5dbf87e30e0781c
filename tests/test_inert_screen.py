"""Text from data is drawn inert in the console: a pod log line, a detail line or a table cell
holding an OSC 52 clipboard write, a colour or a C1 CSI reaches the terminal spelled out, with
the styles around it kept; Rich markup in it is shown as written."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from gpuconsole.ui.format import inert_text
from gpuconsole.ui.widgets.cells import text
from gpuconsole.ui.widgets.log_view import LogView
from gpuconsole.ui.widgets.text_view import TextView

OSC52 = "\x1b]52;c;cHduZWQ=\x07"
LINE = f"step 10 loss 0.5 {OSC52}\x1b[31mred\x9b2J [bold]markup[/bold]"


class Screenful(App[None]):
    def compose(self) -> ComposeResult:
        yield LogView(id="log")
        yield TextView(id="detail")


def drawn(strips) -> str:
    return "".join(segment.text for strip in strips for segment in strip)


async def test_a_pod_log_line_and_a_detail_line_are_drawn_spelled_out() -> None:
    app = Screenful()
    async with app.run_test(size=(120, 10)) as pilot:
        log = app.query_one(LogView)
        log.append([LINE])
        detail = app.query_one(TextView)
        detail.show(Text.assemble(("job ", "bold"), (LINE, "red")))
        await pilot.pause()
        for widget in (log, detail):
            screen = drawn(widget.render_lines(widget.region.reset_offset))
            assert not any(c in screen for c in "\x1b\x07\x9b"), type(widget).__name__
            assert "\\x1b]52;c;cHduZWQ=" in screen and "[bold]markup[/bold]" in screen


def test_a_table_cell_is_spelled_out() -> None:
    cell = text(LINE, "red")
    assert "\x1b" not in cell.plain and "\\x9b2J" in cell.plain and cell.spans[0].style == "red"


def test_spelled_characters_keep_their_style_and_clean_text_is_the_same_object() -> None:
    clean = Text("no controls here", style="bold")
    assert inert_text(clean) is clean
    styled = Text("a")
    styled.append("\x1b[2J", style="red")
    out = inert_text(styled)
    assert out.plain == "a\\x1b[2J"
    assert all(out[at:at + 1].spans for at in range(1, len(out.plain)))  # every character of it red
