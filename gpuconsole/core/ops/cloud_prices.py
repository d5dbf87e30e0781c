"""The same GPU on every watched cloud: what one GPU-hour of it costs on each, in the cloud's own
currency and converted to US dollars through ``[money] rates``.

A price in a currency the rates do not name stays in its currency and its dollar figure is
unknown (None), never a guess: ``gpuconsole cost clouds A100`` shows both and says which rate is
missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuconsole.core.money.catalog import Catalog
from gpuconsole.core.money.currency import BASE, factor
from gpuconsole.core.ops.provision import gpu_family


@dataclass(frozen=True, slots=True)
class GpuHourPrice:
    """One type in one region: its on-demand price per GPU-hour, as billed and in dollars."""

    cloud: str
    instance_type: str
    region: str
    gpu_model: str
    gpus: int
    currency: str
    per_gpu_hour: float  # in ``currency``
    usd_per_gpu_hour: float | None  # None: no [money] rate for ``currency``


def gpu_hour_prices(catalog: Catalog, gpu: str, rates: Mapping[str, float]) -> tuple[GpuHourPrice, ...]:
    """Every priced type carrying ``gpu`` (a family: A100, T4, A10…), cheapest in dollars first,
    the ones with no rate last."""
    want = gpu_family(gpu)
    by_name = {t.name: t for t in catalog.types if t.gpu_count > 0 and gpu_family(t.gpu_model) == want}
    out = []
    for p in catalog.prices:
        itype = by_name.get(p.instance_type)
        if itype is None or p.price <= 0:
            continue
        each = p.price / itype.gpu_count
        rate = factor(itype.currency, BASE, rates)
        out.append(GpuHourPrice(itype.cloud, itype.name, p.region, itype.gpu_model, itype.gpu_count, itype.currency,
                                round(each, 6), round(each * rate, 6) if rate is not None else None))
    return tuple(sorted(out, key=lambda r: (r.usd_per_gpu_hour is None, r.usd_per_gpu_hour or 0.0, r.cloud, r.region)))
