"""The console's top line: product, mode, the state of each source, the burn rate, who is in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from gpuconsole.ui.widgets.text_view import TextView

if TYPE_CHECKING:
    from gpuconsole.model import FleetSnapshot
    from gpuconsole.ui.palette import Palette


def burn_known(snap: FleetSnapshot) -> bool:
    """Whether the burn rate was read: a cloud source that answered at least once."""
    from gpuconsole.model import SourceKind, SourceState

    cloud = snap.source(SourceKind.CLOUD)
    return cloud is not None and cloud.state is not SourceState.UNCONFIGURED and cloud.updated_at is not None


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
        if burn_known(snap):
            bar.append(f"{money(snap.burn_per_hour)}/h", palette.strong)
        else:  # no cloud read yet (or none set up): the spend is unknown, not free
            bar.append("$/h unknown", palette.dim)
        if who:
            bar.append(f"   {who}", palette.accent)
        self.show(bar)
