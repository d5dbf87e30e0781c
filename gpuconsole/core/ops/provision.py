"""Choosing, pricing, checking and launching GPU instances: the logic behind the launch wizard.

The wizard (``gpuconsole/ui/wizards/``) and the CLI call only this module and the
:class:`~gpuconsole.core.money.catalog.CatalogService`; the cloud is reached through a
:class:`~gpuconsole.backends.base.Provisioner` (the AWS adapter or the simulated cloud).
Every function here that talks to the cloud blocks: call it from a worker thread.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, BackendPermissionDenied, CapacityError, Provisioner
from gpuconsole.core.money.catalog import Catalog
from gpuconsole.core.ops.actions import one_line
from gpuconsole.core.ops.launch_checks import (
    MAX_COUNT,
    MAX_ROOT_GIB,
    MAX_TAG_KEY,
    MAX_TAG_VALUE,
    MAX_TAGS,
    MIN_ROOT_GIB,
    validate,
)
from gpuconsole.model import (
    Instance,
    InstanceType,
    LaunchAttempt,
    LaunchSpec,
    SpotPrice,
    Subnet,
    Workload,
)

__all__ = [
    "MAX_COUNT", "MAX_ROOT_GIB", "MAX_TAGS", "MAX_TAG_KEY", "MAX_TAG_VALUE", "MIN_ROOT_GIB", "CostEstimate",
    "LaunchResult", "Launcher", "PriceRow", "TypeFilter", "alternatives", "estimate", "gpu_family", "price_rows",
    "recommend", "validate",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TypeFilter:
    """The wizard's first-step filters. Zero / empty / None means "any"."""

    gpu_model: str = ""  # substring, case-insensitive: "a100", "H100", "L4"
    min_gpu_memory_gib: int = 0  # per GPU
    gpu_count: int = 0  # exact count
    max_price: float | None = None  # on-demand $/h in the chosen region


@dataclass(frozen=True, slots=True)
class PriceRow:
    """On-demand and spot side by side for one type in one zone."""

    instance_type: str
    region: str
    availability_zone: str
    gpus: int
    on_demand: float | None  # $/h; None: no price known for the region
    spot: float | None  # latest spot price in the zone
    spot_min: float | None  # lowest over the history asked for
    spot_max: float | None

    @property
    def on_demand_per_gpu(self) -> float | None:
        if self.on_demand is None or self.gpus <= 0:
            return None
        return self.on_demand / self.gpus

    @property
    def spot_per_gpu(self) -> float | None:
        if self.spot is None or self.gpus <= 0:
            return None
        return self.spot / self.gpus

    @property
    def saving_percent(self) -> float | None:
        """How much cheaper spot is than on-demand, in percent."""
        if self.spot is None or not self.on_demand:
            return None
        return (1.0 - self.spot / self.on_demand) * 100.0


@dataclass(frozen=True, slots=True)
class CostEstimate:
    per_hour: float
    per_day: float
    per_30_days: float


@dataclass(frozen=True, slots=True)
class LaunchResult:
    instances: tuple[Instance, ...]
    attempts: tuple[LaunchAttempt, ...]
    spec: LaunchSpec | None = None  # the spec that finally launched (type/zone may differ)

    @property
    def ok(self) -> bool:
        return bool(self.instances)


TRAINING_CLASS = ("A100", "H100", "H200", "B200")  # substrings of the GPU model
INFERENCE_CLASS = ("T4", "A10G", "A10", "L4", "L40S")  # A10: Alibaba Cloud gn7i, its inference family

TRAINING_MIN_GPU_MEMORY_GIB = 80
INFERENCE_MIN_GPU_MEMORY_GIB = 16
MAX_ALTERNATIVES = 4
MEMORY_CLASS_TOLERANCE = 0.25

# GPU families, longest first where one name contains another ("L40S" before "L4").
_FAMILIES = ("GB200", "B200", "H200", "H100", "A100", "A10G", "L40S", "L4", "T4", "V100", "K80", "M60")


def gpu_family(model: str) -> str:
    """``"NVIDIA A100-SXM4-80GB"`` and ``"NVIDIA A100"`` → ``"A100"``; unknown models stay as given."""
    upper = model.upper()
    for family in _FAMILIES:
        if re.search(rf"(?<![A-Z0-9]){family}(?![0-9])", upper):
            return family
    return upper.removeprefix("NVIDIA ").removeprefix("TESLA ").strip()


def _in_class(model: str, names: tuple[str, ...]) -> bool:
    return gpu_family(model) in {n.upper() for n in names}


def _region_price(catalog: Catalog, itype: InstanceType, region: str) -> float | None:
    """The type's on-demand price in ``region``; the reference price where the catalog has no
    price for that region at all (an estimate beats a blank)."""
    price = catalog.price(itype.name, region)
    if price is not None:
        return price
    if catalog.has_prices(region):
        return None
    return itype.on_demand_price or None


def _sellable(catalog: Catalog, itype: InstanceType, region: str) -> bool:
    """Known to be sold in ``region``: priced there, or the region has no prices to go by."""
    return catalog.price(itype.name, region) is not None or not catalog.has_prices(region)


def _cost_key(catalog: Catalog, itype: InstanceType, region: str) -> tuple[float, str]:
    price = _region_price(catalog, itype, region)
    return (price if price is not None else math.inf, itype.name)


def recommend(catalog: Catalog, workload: Workload, region: str, flt: TypeFilter = TypeFilter()) -> list[InstanceType]:
    """Types that suit ``workload`` in ``region`` and pass ``flt``, cheapest first.

    Training: A100/H100 class, at least 80 GB per GPU, NVLink, local NVMe.
    Inference: T4/A10G/L4 class, at least 16 GB per GPU.
    """
    wanted = flt.gpu_model.strip().lower()
    out: list[InstanceType] = []
    for itype in catalog.types:
        if itype.gpu_count <= 0 or not _sellable(catalog, itype, region):
            continue
        if workload is Workload.TRAINING:
            if not (_in_class(itype.gpu_model, TRAINING_CLASS) and itype.gpu_memory_gib >= TRAINING_MIN_GPU_MEMORY_GIB
                    and itype.nvlink and itype.nvme_gb > 0):
                continue
        elif not (_in_class(itype.gpu_model, INFERENCE_CLASS) and itype.gpu_memory_gib >= INFERENCE_MIN_GPU_MEMORY_GIB):
            continue
        if wanted and wanted not in itype.gpu_model.lower():
            continue
        if flt.min_gpu_memory_gib and itype.gpu_memory_gib < flt.min_gpu_memory_gib:
            continue
        if flt.gpu_count and itype.gpu_count != flt.gpu_count:
            continue
        if flt.max_price is not None:
            price = _region_price(catalog, itype, region)
            if price is None or price > flt.max_price:
                continue
        out.append(itype)
    out.sort(key=lambda t: _cost_key(catalog, t, region))
    return out


def price_rows(catalog: Catalog, region: str, types: list[str], spot: tuple[SpotPrice, ...],
               offerings: dict[str, tuple[str, ...]]) -> list[PriceRow]:
    """One row per (type, zone that offers it), in the order of ``types`` then by zone.

    With no offerings at all (nothing could say which zones sell what) each type gets one row
    with an empty zone, so on-demand prices still show.
    """
    history: dict[tuple[str, str], list[SpotPrice]] = {}
    for p in spot:
        history.setdefault((p.instance_type, p.availability_zone), []).append(p)
    rows: list[PriceRow] = []
    for name in dict.fromkeys(types):
        itype = catalog.get(name)
        gpus = itype.gpu_count if itype is not None else 0
        on_demand = catalog.price(name, region)
        if on_demand is None and itype is not None and not catalog.has_prices(region):
            on_demand = itype.on_demand_price or None
        zones = sorted(offerings.get(name, ())) if offerings else [""]
        for zone in zones:
            points = history.get((name, zone), [])
            latest = max(points, key=lambda p: p.ts).price if points else None
            rows.append(PriceRow(
                instance_type=name, region=region, availability_zone=zone, gpus=gpus, on_demand=on_demand,
                spot=latest,
                spot_min=min(p.price for p in points) if points else None,
                spot_max=max(p.price for p in points) if points else None,
            ))
    return rows


def estimate(hourly: float, count: int = 1) -> CostEstimate:
    per_hour = hourly * count
    return CostEstimate(per_hour=per_hour, per_day=per_hour * 24.0, per_30_days=per_hour * 24.0 * 30.0)


# --------------------------------------------------------------------------- alternatives


def alternatives(catalog: Catalog, instance_type: str, region: str) -> list[InstanceType]:
    """Other types with similar GPUs: same model first, then same memory class; cheapest first.

    A type counts as similar when it has at least as many GPUs (a job sized for eight GPUs does
    not fit on one) and is known to be sold in ``region``. At most four are returned.
    """
    base = catalog.get(instance_type)
    if base is None:
        return []
    family = gpu_family(base.gpu_model)
    spread = MEMORY_CLASS_TOLERANCE * base.gpu_memory_gib
    same: list[InstanceType] = []
    similar: list[InstanceType] = []
    for itype in catalog.types:
        if itype.name == instance_type or itype.gpu_count < base.gpu_count or not _sellable(catalog, itype, region):
            continue
        if gpu_family(itype.gpu_model) == family:
            same.append(itype)
        elif base.gpu_memory_gib and abs(itype.gpu_memory_gib - base.gpu_memory_gib) <= spread:
            similar.append(itype)
    same.sort(key=lambda t: _cost_key(catalog, t, region))
    similar.sort(key=lambda t: _cost_key(catalog, t, region))
    return (same + similar)[:MAX_ALTERNATIVES]


# --------------------------------------------------------------------------- launching


@dataclass
class Launcher:
    """Launches a spec, moving on to other zones and then similar types on capacity errors."""

    provisioner: Provisioner
    catalog: Catalog
    offerings: Callable[[str, tuple[str, ...]], dict[str, tuple[str, ...]]]
    clock: Callable[[], float] = field(default=lambda: 0.0)

    def dry_run(self, spec: LaunchSpec) -> None:
        """Raises :class:`~gpuconsole.backends.base.DryRunFailed` (or another BackendError)."""
        self.provisioner.launch(spec, dry_run=True)

    def launch(self, spec: LaunchSpec, on_attempt: Callable[[LaunchAttempt], None] | None = None,
               *, try_alternatives: bool = True) -> LaunchResult:
        """Try ``spec``; on a capacity error try the other zones that offer the type, then (with
        ``try_alternatives``) similar types in the zones that offer them. Any other error stops.

        Every attempt is passed to ``on_attempt`` as soon as the cloud has answered it.
        """
        run = _LaunchRun(self, spec, on_attempt)
        first = run.attempt(spec)
        if first is not None:
            return run.result(first, spec)
        if run.stopped:
            return run.result()
        tried = {run.zone_of(spec)} - {""}
        for candidate in run.other_zones(spec, spec.instance_type, tried):
            instances = run.attempt(candidate)
            if instances is not None:
                return run.result(instances, candidate)
            if run.stopped:
                return run.result()
        if try_alternatives:
            for alt in alternatives(self.catalog, spec.instance_type, spec.region):
                for candidate in run.other_zones(spec, alt.name, set()):
                    instances = run.attempt(candidate)
                    if instances is not None:
                        return run.result(instances, candidate)
                    if run.stopped:
                        return run.result()
        return run.result()


class _LaunchRun:
    """The state of one :meth:`Launcher.launch`: attempts so far and the region's subnets."""

    def __init__(self, launcher: Launcher, spec: LaunchSpec,
                 on_attempt: Callable[[LaunchAttempt], None] | None) -> None:
        self.launcher = launcher
        self.spec = spec
        self.on_attempt = on_attempt
        self.attempts: list[LaunchAttempt] = []
        self.stopped = False
        self._subnets: tuple[Subnet, ...] | None = None

    def subnets(self) -> tuple[Subnet, ...]:
        if self._subnets is None:
            try:
                self._subnets = tuple(self.launcher.provisioner.subnets(self.spec.region))
            except BackendError as exc:
                log.info("subnets of %s unknown: %s", self.spec.region, one_line(exc))
                self._subnets = ()
        return self._subnets

    def zone_of(self, spec: LaunchSpec) -> str:
        """Where ``spec`` launches: its subnet's zone, else the zone it names ("" = EC2 picks)."""
        if spec.subnet_id:
            for subnet in self.subnets():
                if subnet.subnet_id == spec.subnet_id:
                    return subnet.availability_zone
        return spec.availability_zone

    def other_zones(self, spec: LaunchSpec, instance_type: str, tried: set[str]) -> list[LaunchSpec]:
        """``spec`` moved to ``instance_type`` in each zone that offers it (and, with a subnet,
        has a subnet of the same VPC), in the order the offerings list them."""
        try:
            zones = self.launcher.offerings(spec.region, (instance_type,)).get(instance_type, ())
        except BackendError as exc:
            log.info("offerings of %s in %s unknown: %s", instance_type, spec.region, one_line(exc))
            return []
        vpc = ""
        if spec.subnet_id:
            vpc = next((s.vpc_id for s in self.subnets() if s.subnet_id == spec.subnet_id), "")
            if not vpc:
                return []
        out: list[LaunchSpec] = []
        for zone in zones:
            if zone in tried:
                continue
            if vpc:
                in_zone = [s for s in self.subnets() if s.vpc_id == vpc and s.availability_zone in (zone, "")]  # "": regional (Azure)
                if not in_zone:
                    continue
                subnet = max(in_zone, key=lambda s: (s.default_for_az, s.available_ips))
                out.append(replace(spec, instance_type=instance_type, availability_zone=zone,
                                   subnet_id=subnet.subnet_id))
            else:
                out.append(replace(spec, instance_type=instance_type, availability_zone=zone))
        return out

    def attempt(self, spec: LaunchSpec) -> tuple[Instance, ...] | None:
        """One launch; the instances, or None after a failure (``stopped`` unless capacity)."""
        zone = self.zone_of(spec)
        try:
            instances = tuple(self.launcher.provisioner.launch(spec))
        except CapacityError as exc:
            self._record(spec, zone, False, one_line(exc))
            return None
        except BackendPermissionDenied:
            raise  # the caller is refused (IAM): no other zone helps, and the action path says denied
        except BackendError as exc:
            self._record(spec, zone, False, one_line(exc))
            self.stopped = True
            return None
        if not instances:
            self._record(spec, zone, False, "the cloud launched nothing")
            self.stopped = True
            return None
        zone = zone or instances[0].availability_zone
        ids = tuple(i.instance_id for i in instances)
        self._record(spec, zone, True, f"launched {', '.join(ids)}", ids)
        return instances

    def _record(self, spec: LaunchSpec, zone: str, ok: bool, message: str, ids: tuple[str, ...] = ()) -> None:
        attempt = LaunchAttempt(spec.instance_type, zone, spec.market, ok, message, ids, self.launcher.clock())
        self.attempts.append(attempt)
        if self.on_attempt is not None:
            self.on_attempt(attempt)

    def result(self, instances: tuple[Instance, ...] = (), spec: LaunchSpec | None = None) -> LaunchResult:
        if spec is not None and instances and not spec.availability_zone:
            spec = replace(spec, availability_zone=instances[0].availability_zone)
        return LaunchResult(instances, tuple(self.attempts), spec)
