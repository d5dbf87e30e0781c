"""Azure's public Retail Prices API (no credentials): what a VM size costs per hour in a region,
pay-as-you-go or Spot, for Linux or Windows, cached for hours like the EC2 catalog.

``GET {prices_endpoint}?$filter=serviceName eq 'Virtual Machines' and armRegionName eq 'eastus'
and armSkuName eq 'Standard_NC4as_T4_v3' and priceType eq 'Consumption'`` answers ``Items`` a page
at a time, the next page at ``NextPageLink``
(https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices). Each
size has several meters: the plain one (pay-as-you-go), ``… Spot`` and ``… Low Priority`` (the
retired Batch/scale-set priority, never a VM's price here); a product name ending in ``Windows``
is the Windows meter (it includes the licence).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gpuconsole.backends.base import BackendError

PUBLIC_ENDPOINT = "https://prices.azure.com/api/retail/prices"
CACHE_S = 6 * 3600.0  # published prices change monthly at most
RETRY_FAILED_S = 300.0  # after a failure, prices are not asked again for this long (a poll never waits on them)
MAX_PAGES = 50
TIMEOUT_S = 15.0


def pick(items: list[dict[str, Any]], *, spot: bool, windows: bool) -> tuple[float, str] | None:
    """``(price per hour, currency)`` of the meter a VM bills by, or None when none matches:
    Consumption, the OS's product, Spot or not, never Low Priority."""
    for item in items:
        name = f"{item.get('skuName', '')} {item.get('meterName', '')}"
        if str(item.get("type") or "Consumption") != "Consumption" or "Low Priority" in name:
            continue
        if ("Spot" in name) != spot:
            continue
        if str(item.get("productName") or "").endswith("Windows") != windows:
            continue
        if str(item.get("unitOfMeasure") or "1 Hour") != "1 Hour":
            continue
        return float(item.get("retailPrice") or item.get("unitPrice") or 0.0), str(item.get("currencyCode") or "USD")
    return None


class RetailPrices:
    """The Retail Prices API at ``endpoint`` (a full URL), with a per-(region, size) cache."""

    def __init__(self, endpoint: str = PUBLIC_ENDPOINT, clock: Callable[[], float] = time.time) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self._cache: dict[tuple[str, str], tuple[float, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._session: Any = None
        self._failed: tuple[float, str] | None = None  # when the API last failed, and why

    def items(self, region: str, size: str) -> list[dict[str, Any]]:
        """Every Consumption meter of ``size`` in ``region`` (cached for :data:`CACHE_S`)."""
        key = (region.lower(), size)
        with self._lock:
            found = self._cache.get(key)
        if found is not None and self.clock() - found[0] < CACHE_S:
            return found[1]
        failed = self._failed
        if failed is not None and self.clock() - failed[0] < RETRY_FAILED_S:
            raise BackendError(failed[1])
        query = (f"serviceName eq 'Virtual Machines' and armRegionName eq '{region.lower()}' "
                 f"and armSkuName eq '{size}' and priceType eq 'Consumption'")
        try:
            rows = self._pages({"$filter": query})
        except BackendError as exc:
            self._failed = (self.clock(), str(exc))
            raise
        self._failed = None
        with self._lock:
            self._cache[key] = (self.clock(), rows)
        return rows

    def region_items(self, region: str) -> list[dict[str, Any]]:
        """Every Consumption VM meter in ``region`` (the catalog's prices, one walk of the pages)."""
        query = f"serviceName eq 'Virtual Machines' and armRegionName eq '{region.lower()}' and priceType eq 'Consumption'"
        rows = self._pages({"$filter": query})
        now = self.clock()
        by_size: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_size.setdefault(str(row.get("armSkuName") or ""), []).append(row)
        with self._lock:
            for size, found in by_size.items():
                self._cache[(region.lower(), size)] = (now, found)
        return rows

    def price(self, region: str, size: str, *, spot: bool = False, windows: bool = False) -> tuple[float, str] | None:
        return pick(self.items(region, size), spot=spot, windows=windows)

    def _pages(self, params: dict[str, str]) -> list[dict[str, Any]]:
        import requests  # azure-core's transport; trusts REQUESTS_CA_BUNDLE like the SDK's calls

        if self._session is None:
            self._session = requests.Session()
        rows: list[dict[str, Any]] = []
        url: str | None = self.endpoint
        query: dict[str, str] | None = params
        for _ in range(MAX_PAGES):
            if not url:
                break
            try:
                answer = self._session.get(url, params=query, timeout=TIMEOUT_S)
                answer.raise_for_status()
                body = answer.json()
            except requests.RequestException as exc:
                raise BackendError(f"Azure Retail Prices: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
            except ValueError:
                raise BackendError("Azure Retail Prices: the answer was not JSON") from None
            rows.extend(x for x in body.get("Items") or () if isinstance(x, dict))
            url, query = body.get("NextPageLink") or None, None  # the link carries the query
        return rows

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
