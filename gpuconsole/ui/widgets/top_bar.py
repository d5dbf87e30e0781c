"""The console's top line: product, mode, the state of each source, the burn rate, who is in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from gpuconsole.ui.widgets.text_view import TextView

if TYPE_CHECKING:
    from gpuconsole.model import FleetSnapshot
    from gpuconsole.ui.palette import Palette


class TopBar(TextView):
    """``gpuconsole  DEMO  ● gpus  ● jobs  ● cloud   $41.20/h   ada · admin``."""

    def starting(self, palette: Palette) -> None:
        """While the console is being built: ``gpuconsole  starting…``."""
        bar = Text(no_wrap=True, overflow="ellipsis")
        bar.append(" gpuconsole ", palette.strong)
        bar.append("  starting…", palette.dim)
        self.show(bar)

    def draw(self, snap: FleetSnapshot, palette: Palette, dots: list[Text], who: str) -> None:
        """``dots``: each source's coloured dot, in the order of ``snap.sources``."""
        from gpuconsole.ui.format import money

        bar = Text(no_wrap=True, overflow="ellipsis")
        bar.append(" gpuconsole ", palette.strong)
        if snap.demo:
            bar.append(" DEMO ", palette.accent)
        for status, dot in zip(snap.sources, dots, strict=True):
            bar.append("  ")
            bar.append_text(dot)
            bar.append(status.kind.value)
        bar.append("   ")
        bar.append(f"{money(snap.burn_per_hour)}/h", palette.strong)
        if who:
            bar.append(f"   {who}", palette.accent)
        self.show(bar)
