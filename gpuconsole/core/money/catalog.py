"""The GPU instance catalog: bundled facts and prices, refreshed from the cloud, cached with a TTL.

``gpuconsole/data/gpu_catalog.json`` ships with the package so the wizard works with no Pricing
access at all; when a :class:`~gpuconsole.backends.base.Provisioner` can answer, the catalog is
refreshed from it and cached in the Store (``catalog`` / ``spot`` / ``offerings`` keys of the
settings table) until its TTL runs out. A failed refresh keeps the last good catalog and says so.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, Provisioner, one_line
from gpuconsole.model import (
    InstanceType,
    RegionPrice,
    SpotPrice,
    from_jsonable,
    to_jsonable,
)

log = logging.getLogger(__name__)

CATALOG_TTL = 7 * 24 * 3600.0
SPOT_TTL = 10 * 60.0
OFFERINGS_TTL = 24 * 3600.0
RETRY_FAILED_AFTER = 10 * 60.0  # after a failed refresh, the next automatic try

CATALOG_KEY = "catalog"
SPOT_KEY = "spot"
OFFERINGS_KEY = "offerings"
REFERENCE_REGION = "us-east-1"  # the price an InstanceType carries, where the type is sold there
MAX_CACHED_QUERIES = 64  # spot / offerings answers kept in the Store; the oldest go first


@dataclass(frozen=True, slots=True)
class Catalog:
    """GPU instance types and their on-demand prices per region.

    Attributes:
        source: ``"bundled"`` (the data file) or ``"live"`` (refreshed from the cloud).
        fetched_at: when the data was produced (the file's date for the bundled catalog).
    """

    types: tuple[InstanceType, ...]
    prices: tuple[RegionPrice, ...]
    source: str
    fetched_at: float
    _by_name: dict[str, InstanceType] = field(init=False, repr=False, compare=False)
    _by_key: dict[tuple[str, str], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {t.name: t for t in self.types})
        object.__setattr__(self, "_by_key", {(p.instance_type, p.region): p.price for p in self.prices})

    def get(self, name: str) -> InstanceType | None:
        return self._by_name.get(name)

    def price(self, instance_type: str, region: str) -> float | None:
        return self._by_key.get((instance_type, region))

    def regions(self) -> tuple[str, ...]:
        """Every region with at least one price, in the order the prices list them."""
        return tuple(dict.fromkeys(p.region for p in self.prices))

    def has_prices(self, region: str) -> bool:
        """Whether any type is priced in ``region`` (a region the catalog knows at all)."""
        return any(r == region for _, r in self._by_key)

    def covers(self, regions: Iterable[str]) -> bool:
        known = set(self.regions())
        return all(r in known for r in regions)


def _reference_price(prices: dict[str, float], fallback: float = 0.0) -> float:
    if REFERENCE_REGION in prices:
        return prices[REFERENCE_REGION]
    return next(iter(prices.values()), fallback)


@functools.cache
def bundled_catalog() -> Catalog:
    """The catalog shipped in ``gpuconsole/data/gpu_catalog.json``."""
    text = resources.files("gpuconsole.data").joinpath("gpu_catalog.json").read_text(encoding="utf-8")
    data = json.loads(text)
    price_table: dict[str, dict[str, float]] = data["prices"]
    types = tuple(
        InstanceType(
            name=t["name"], gpu_model=t["gpu_model"], gpu_count=int(t["gpu_count"]),
            gpu_memory_gib=int(t["gpu_memory_gib"]), vcpus=int(t["vcpus"]), memory_gib=int(t["memory_gib"]),
            on_demand_price=float(_reference_price(price_table.get(t["name"], {}))),
            network=t.get("network", ""), nvme_gb=int(t.get("nvme_gb", 0)), nvlink=bool(t.get("nvlink", False)),
        )
        for t in data["types"]
    )
    prices = tuple(
        RegionPrice(name, region, float(price))
        for name, by_region in price_table.items()
        for region, price in by_region.items()
    )
    as_of = datetime.fromisoformat(data["as_of"])
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    return Catalog(types, prices, "bundled", as_of.timestamp())


def merge(base: Catalog, types: Iterable[InstanceType], listed: Iterable[RegionPrice],
          priced: Iterable[RegionPrice], fetched_at: float,
          present: dict[str, set[str]] | None = None) -> Catalog:
    """A live catalog: the cloud's facts win over ``base``'s, and fields it leaves empty are filled
    from ``base``. Prices: ``priced`` (the Pricing API) wins, then ``listed`` (prices the type
    listing carried), then ``base``.

    ``present`` maps each region whose types were listed to the names listed there: a bundled
    price of a type that region's listing lacks is dropped, so the wizard never offers a type
    the account cannot launch there.
    """
    present = present or {}
    by_name: dict[str, InstanceType] = {t.name: t for t in base.types}
    for live in types:
        known = by_name.get(live.name)
        if known is not None:
            fill = {name: getattr(known, name) for name in
                    ("gpu_model", "gpu_count", "gpu_memory_gib", "vcpus", "memory_gib", "network", "nvme_gb", "nvlink")
                    if not getattr(live, name) and getattr(known, name)}
            live = replace(live, **fill) if fill else live
        by_name[live.name] = live
    table: dict[str, dict[str, float]] = {}
    for source in (base.prices, listed, priced):
        for p in source:
            if source is base.prices and p.region in present and p.instance_type not in present[p.region]:
                continue
            if p.price > 0:
                table.setdefault(p.instance_type, {})[p.region] = p.price
    merged_types = tuple(
        replace(t, on_demand_price=_reference_price(table.get(t.name, {}), t.on_demand_price))
        for t in by_name.values()
    )
    prices = tuple(RegionPrice(name, region, price) for name, by_region in table.items()
                   for region, price in by_region.items())
    return Catalog(merged_types, prices, "live", fetched_at)


@dataclass
class _Entry:
    """One cached answer of the cloud (spot history or zone offerings)."""

    at: float
    value: Any
    days: int = 0


class CatalogService:
    """Catalog, spot prices and zone offerings with TTL caching in the Store (blocking calls).

    ``store`` may be None (no cache). ``last_error`` holds the one-line reason of the last failed
    refresh, or None.
    """

    def __init__(self, provisioner: Provisioner | None, store: object | None = None, *,
                 clock: Callable[[], float] = time.time, ttl: float = CATALOG_TTL,
                 spot_ttl: float = SPOT_TTL, offerings_ttl: float = OFFERINGS_TTL) -> None:
        self.provisioner = provisioner
        self.store = store
        self.clock = clock
        self.ttl = ttl
        self.spot_ttl = spot_ttl
        self.offerings_ttl = offerings_ttl
        self._failed_at: float | None = None
        self.last_error: str | None = None
        self._lock = threading.Lock()  # guards the in-memory state below (short holds only)
        self._refreshing = threading.Lock()  # one catalog refresh at a time
        self._catalog: Catalog | None = None
        self._catalog_regions: tuple[str, ...] = ()
        self._store_read = False
        self._spot: dict[str, _Entry] = {}
        self._offerings: dict[str, _Entry] = {}
        self._latest_spot: dict[tuple[str, str], SpotPrice] = {}
        self._loaded: set[str] = set()

    # ------------------------------------------------------------------ catalog
    def catalog(self, regions: tuple[str, ...], *, refresh: bool = False) -> Catalog:
        with self._refreshing:
            now = self.clock()
            cached, cached_regions = self._cached_catalog()
            if (not refresh and cached is not None and now - cached.fetched_at < self.ttl
                    and set(regions) <= set(cached_regions)):
                return cached
            if self.provisioner is None:
                return cached if cached is not None else bundled_catalog()
            if not refresh and self._failed_at is not None and now - self._failed_at < RETRY_FAILED_AFTER:
                return cached if cached is not None else bundled_catalog()  # do not hammer a refusing API
            try:
                live, note = self._fetch(regions, now)
            except BackendError as exc:
                self.last_error = one_line(exc)
                self._failed_at = now
                log.info("catalog refresh failed: %s", self.last_error)
                return cached if cached is not None else bundled_catalog()
            self._failed_at = None
            self.last_error = note
            fetched = tuple(regions)
            with self._lock:
                self._catalog = live
                self._catalog_regions = fetched
            self._save(CATALOG_KEY, {
                "fetched_at": live.fetched_at,
                "regions": list(fetched),
                "types": to_jsonable(live.types),
                "prices": to_jsonable(live.prices),
            })
            return live

    def _fetch(self, regions: tuple[str, ...], now: float) -> tuple[Catalog, str | None]:
        assert self.provisioner is not None
        types: list[InstanceType] = []
        listed: list[RegionPrice] = []
        present: dict[str, set[str]] = {}
        for region in regions:
            for t in self.provisioner.instance_types(region):
                types.append(t)
                present.setdefault(region, set()).add(t.name)
                if t.on_demand_price > 0:
                    listed.append(RegionPrice(t.name, region, t.on_demand_price))
        note = None
        try:
            priced = self.provisioner.on_demand_prices(tuple(regions))
        except BackendError as exc:
            # The types are live; prices fall back to the bundled list (many roles lack Pricing).
            priced = ()
            note = f"prices: {one_line(exc)}; bundled prices shown"
        return merge(bundled_catalog(), types, listed, priced, now, present), note

    def _cached_catalog(self) -> tuple[Catalog | None, tuple[str, ...]]:
        """The last live catalog, from memory, else from the Store (read once)."""
        with self._lock:
            if self._catalog is not None or self._store_read:
                return self._catalog, self._catalog_regions
            self._store_read = True
        data = self._load(CATALOG_KEY)
        if not isinstance(data, dict):
            return None, ()
        try:
            catalog = Catalog(
                from_jsonable(tuple[InstanceType, ...], data["types"]),
                from_jsonable(tuple[RegionPrice, ...], data["prices"]),
                "live",
                float(data["fetched_at"]),
            )
            regions = tuple(str(r) for r in data["regions"])
        except (ValueError, KeyError, TypeError) as exc:
            log.info("cached catalog ignored: %s", exc)
            return None, ()
        with self._lock:
            if self._catalog is None:
                self._catalog, self._catalog_regions = catalog, regions
            return self._catalog, self._catalog_regions

    # ------------------------------------------------------------------ spot prices
    def spot_prices(self, region: str, instance_types: tuple[str, ...], *, days: int = 7) -> tuple[SpotPrice, ...]:
        if self.provisioner is None:
            return ()
        key = _query_key(region, instance_types)
        now = self.clock()
        entry = self._entry(SPOT_KEY, self._spot, key, lambda v: from_jsonable(tuple[SpotPrice, ...], v))
        if entry is not None and now - entry.at < self.spot_ttl and entry.days >= days:
            return entry.value  # type: ignore[no-any-return]
        try:
            prices = self.provisioner.spot_prices(region, tuple(instance_types), since=now - days * 86400.0)
        except BackendError as exc:
            if entry is None:
                raise
            log.info("spot prices of %s kept from %.0f s ago: %s", key, now - entry.at, one_line(exc))
            return entry.value  # type: ignore[no-any-return]
        prices = tuple(prices)
        self._remember(SPOT_KEY, self._spot, key, _Entry(now, prices, days), to_jsonable(prices))
        return prices

    def cached_spot_price(self, instance_type: str, availability_zone: str) -> float | None:
        """The latest spot price already fetched for this type and zone; never calls the cloud."""
        with self._lock:
            latest = self._latest_spot.get((instance_type, availability_zone))
        return latest.price if latest is not None else None

    def cached_spot_series(self, instance_type: str, availability_zone: str) -> tuple[tuple[float, float], ...]:
        """Every spot price already fetched for this type and zone, ``(from, $/h)`` oldest first,
        for billing each interval at the price then in force; never calls the cloud."""
        with self._lock:
            seen = {p.ts: p.price for entry in self._spot.values() for p in entry.value
                    if p.instance_type == instance_type and p.availability_zone == availability_zone}
        return tuple(sorted(seen.items()))

    # ------------------------------------------------------------------ offerings
    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        if self.provisioner is None:
            return {}
        key = _query_key(region, instance_types)
        now = self.clock()
        entry = self._entry(OFFERINGS_KEY, self._offerings, key, _decode_offerings)
        if entry is not None and now - entry.at < self.offerings_ttl:
            return dict(entry.value)
        try:
            found = self.provisioner.offerings(region, tuple(instance_types))
        except BackendError as exc:
            if entry is None:
                raise
            log.info("offerings of %s kept from %.0f s ago: %s", key, now - entry.at, one_line(exc))
            return dict(entry.value)
        value = {t: tuple(zones) for t, zones in found.items()}
        self._remember(OFFERINGS_KEY, self._offerings, key, _Entry(now, value),
                       {t: list(z) for t, z in value.items()})
        return dict(value)

    # ------------------------------------------------------------------ cache plumbing
    def _entry(self, store_key: str, memory: dict[str, _Entry], key: str,
               decode: Callable[[Any], Any]) -> _Entry | None:
        """The cached answer for ``key``; the Store's answers are read into memory once."""
        with self._lock:
            entry = memory.get(key)
            first = store_key not in self._loaded
            self._loaded.add(store_key)
        if entry is not None or not first:
            return entry
        stored = self._load(store_key)
        if isinstance(stored, dict):
            loaded: dict[str, _Entry] = {}
            for k, row in stored.items():
                try:
                    loaded[k] = _Entry(float(row["at"]), decode(row["value"]), int(row.get("days", 0)))
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue
            with self._lock:
                for k, e in loaded.items():
                    if k not in memory:
                        memory[k] = e
                        if store_key == SPOT_KEY:
                            self._note_spot(e.value)
                entry = memory.get(key)
        return entry

    def _remember(self, store_key: str, memory: dict[str, _Entry], key: str, entry: _Entry,
                  jsonable: Any) -> None:
        with self._lock:
            memory[key] = entry
            if store_key == SPOT_KEY:
                self._note_spot(entry.value)
            stored_keys = sorted(memory, key=lambda k: memory[k].at)[-MAX_CACHED_QUERIES:]
            rows = {k: {"at": memory[k].at, "days": memory[k].days,
                        "value": jsonable if k == key else _jsonable_entry(store_key, memory[k])}
                    for k in stored_keys}
        self._save(store_key, rows)

    def _note_spot(self, prices: Iterable[SpotPrice]) -> None:
        """Keep the newest price per (type, zone); the caller holds the lock."""
        latest = self._latest_spot
        for p in prices:
            known = latest.get((p.instance_type, p.availability_zone))
            if known is None or p.ts >= known.ts:
                latest[(p.instance_type, p.availability_zone)] = p

    def _load(self, key: str) -> Any:
        if self.store is None:
            return None
        try:
            return self.store.get_setting(key, None)  # type: ignore[attr-defined]
        except Exception as exc:  # a cache that cannot be read is a cache miss
            log.info("could not read %s from the store: %s", key, exc)
            return None

    def _save(self, key: str, value: Any) -> None:
        if self.store is None:
            return
        try:
            self.store.set_setting(key, value)  # type: ignore[attr-defined]
        except Exception as exc:  # a cache that cannot be written only costs a refetch
            log.info("could not write %s to the store: %s", key, exc)


def _query_key(region: str, instance_types: Iterable[str]) -> str:
    return f"{region}|{','.join(sorted(set(instance_types)))}"


def _decode_offerings(value: Any) -> dict[str, tuple[str, ...]]:
    return {str(t): tuple(str(z) for z in zones) for t, zones in value.items()}


def _jsonable_entry(store_key: str, entry: _Entry) -> Any:
    if store_key == OFFERINGS_KEY:
        return {t: list(z) for t, z in entry.value.items()}
    return to_jsonable(entry.value)
