"""UTC days and months: the periods spend is counted in (EC2 and Cost Explorer count in UTC)."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime

RESOURCE_DAYS = 14  # the days of resource-level daily cost Cost Explorer keeps (GetCostAndUsageWithResources)


def day_start(now: float) -> float:
    """Midnight UTC of the day containing ``now``."""
    d = datetime.fromtimestamp(now, UTC)
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()


def month_start(now: float) -> float:
    d = datetime.fromtimestamp(now, UTC)
    return datetime(d.year, d.month, 1, tzinfo=UTC).timestamp()


def month_end(now: float) -> float:
    d = datetime.fromtimestamp(now, UTC)
    last = calendar.monthrange(d.year, d.month)[1]
    return datetime(d.year, d.month, last, tzinfo=UTC).timestamp() + 86400.0
