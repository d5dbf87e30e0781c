"""What the launch wizard's steps decided so far: the workload, region, GPU type and market.

The wizard (:mod:`.provision`) keeps one :class:`Choice`; its steps read and fill it through
:class:`~gpuconsole.ui.wizards.fields.LaunchWizard`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuconsole.model import InstanceType, Market, Workload


@dataclass
class Choice:
    """What the first two steps decided; the Details step adds the rest of the spec."""

    workload: Workload = Workload.TRAINING
    region: str = ""
    instance_type: InstanceType | None = None
    on_demand: float | None = None  # $/h of the type in the region
    availability_zone: str = ""
    market: Market = Market.ON_DEMAND
    spot_price: float | None = None  # the latest spot price in the chosen zone
    max_spot_price: float | None = None

    @property
    def hourly(self) -> float | None:
        """What one instance costs per hour in the chosen market, as far as is known."""
        if self.market is Market.SPOT:
            return self.spot_price if self.spot_price is not None else self.max_spot_price
        return self.on_demand

    def describe(self) -> str:
        """``p5.48xlarge · 8× H100 80 GiB · us-east-1b · spot``."""
        itype = self.instance_type
        if itype is None:
            return self.region
        words = [itype.name, f"{itype.gpu_count}× {short_gpu(itype.gpu_model)} {itype.gpu_memory_gib} GiB",
                 self.availability_zone or self.region]
        if self.availability_zone or self.market is Market.SPOT:
            words.append(self.market.value)
        return " · ".join(words)


def short_gpu(model: str) -> str:
    return model.replace("NVIDIA ", "").replace("Tesla ", "")
