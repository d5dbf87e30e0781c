"""What an arm's node costs an hour, on-demand or spot, as the run is billed.

On-demand prices come from the GPU catalog (the live one when the console has refreshed it,
else the bundled file, in the reference region). A spot price comes from the cloud when a
caller has one; otherwise it is the on-demand price less :data:`SPOT_DISCOUNT`, the typical
discount of GPU spot capacity, and the analysis says so in its source line.
"""

from __future__ import annotations

import math

from collections.abc import Callable

from gpuconsole.core.money.catalog import REFERENCE_REGION, Catalog, bundled_catalog

SPOT_DISCOUNT = 0.65
SpotLookup = Callable[[str], float | None]


class ArmPrices:
    """Hourly prices of instance types, by market.

    Args:
        catalog: the catalog to read on-demand prices from.
        spot: an instance type's current spot price per hour, or None when unknown.
        region: the region the experiment runs in.
    """

    def __init__(self, catalog: Catalog | None = None, spot: SpotLookup | None = None,
                 region: str = REFERENCE_REGION) -> None:
        self.catalog = catalog or bundled_catalog()
        self.spot = spot
        self.region = region

    def on_demand(self, instance_type: str) -> float:
        """Per hour; NaN (unknown) for a type on another cloud (``alibaba:…``) the catalog has no
        price for, never 0."""
        cloud, _, name = instance_type.rpartition(":")
        price = self.catalog.price(name, self.region)
        if price is None:
            itype = self.catalog.get(name)
            price = itype.on_demand_price if itype is not None else (math.nan if cloud else 0.0)
        return price

    def spot_price(self, instance_type: str) -> float:
        live = self.spot(instance_type) if self.spot is not None else None
        return live if live is not None else self.on_demand(instance_type) * (1.0 - SPOT_DISCOUNT)

    def hourly(self, instance_type: str, market: str) -> float:
        """The $/h a node of ``instance_type`` is billed in ``market``."""
        return self.spot_price(instance_type) if market == "spot" else self.on_demand(instance_type)

    @property
    def source(self) -> str:
        spot = "live spot prices" if self.spot is not None else f"spot at {SPOT_DISCOUNT:.0%} off"
        return f"{self.catalog.source} catalog, {self.region}; {spot}"
