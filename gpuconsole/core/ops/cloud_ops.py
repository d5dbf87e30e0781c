"""Cloud instances through the core: the catalog, the launch wizard's calls, and instance actions.

The UI and the CLI reach the cloud only through :class:`CloudOps` (``console.cloud``). Every
method blocks (it calls the cloud or reads the Store): call it from a worker thread. Every
failure reaches the caller as :class:`~gpuconsole.core.ops.actions.ActionError` with one line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, InstanceHistory, Provisioner, Regional, VolumeListing
from gpuconsole.core.money.catalog import Catalog, CatalogService, bundled_catalog
from gpuconsole.core.money.costs import spent_by
from gpuconsole.core.money.run_history import RunBook
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    one_line,
    run_action,
)
from gpuconsole.core.ops.provision import Launcher, LaunchResult, validate
from gpuconsole.model import (
    Instance,
    KeyPair,
    LaunchAttempt,
    LaunchSpec,
    MachineImage,
    Market,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Volume,
    Workload,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

NOT_A_CLOUD = "no cloud account that can launch instances is configured"
VOLUMES_EVERY_S = 300.0  # EBS volumes change rarely: DescribeVolumes at most this often


class LaunchFailed(ActionError):
    """Nothing launched; ``result.attempts`` says what was tried and what the cloud answered."""

    def __init__(self, message: str, result: LaunchResult) -> None:
        super().__init__(message)
        self.result = result


class CloudOps:
    """What the console can do with the cloud backend it polls.

    Args:
        backend: the cloud backend of the Hub (the AWS adapter, the simulator, or a stand-in).
        store: returns the Store once it is open, or None (the catalog is then cached in memory).
        clock: the console's clock.
        log: where every action's result is recorded.
    """

    def __init__(self, backend: Any, store: Callable[[], Any], clock: Callable[[], float] = time.time,
                 log: ActionLog | None = None) -> None:
        self.backend = backend
        self._store = store
        self.clock = clock
        self.log = log if log is not None else ActionLog()
        self._service: CatalogService | None = None
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self.runs = RunBook(backend if isinstance(backend, InstanceHistory) else None, store)
        self.volumes: tuple[Volume, ...] = ()  # the watched regions' EBS volumes, attached or not
        self._volumes_at = float("-inf")
        self._history_worker: threading.Thread | None = None
        self._history_lock = threading.Lock()
        self.on_history: Callable[[], None] | None = None  # told when history or volumes arrived

    # ------------------------------------------------------------------ what there is
    @property
    def available(self) -> bool:
        """Whether the backend can launch and control instances."""
        return isinstance(self.backend, Provisioner)

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(self.backend.regions) if self.available else ()

    @property
    def service(self) -> CatalogService:
        with self._lock:
            if self._service is None:
                provisioner = self.backend if self.available else None
                self._service = CatalogService(provisioner, self._store(), clock=self.clock)
            return self._service

    def catalog(self, *, refresh: bool = False) -> Catalog:
        """The GPU catalog for the console's regions (bundled when the cloud cannot say)."""
        catalog = self.service.catalog(self.regions, refresh=refresh)
        self._catalog = catalog
        return catalog

    @property
    def catalog_note(self) -> str:
        """Where the catalog came from, for the wizard's header."""
        catalog = self._catalog
        if catalog is None:
            return ""
        age = max(0.0, self.clock() - catalog.fetched_at)
        text = f"{catalog.source} catalog, {_age(age)} old"
        error = self.service.last_error if self._service is not None else None
        return f"{text} (refresh failed: {error})" if error else text

    def spot_prices(self, region: str, types: tuple[str, ...]) -> tuple[SpotPrice, ...]:
        return self._call(lambda: self.service.spot_prices(region, types))

    def offerings(self, region: str, types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        return self._call(lambda: self.service.offerings(region, types))

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        return self._call(lambda: self._provisioner().subnets(region))

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        return self._call(lambda: self._provisioner().security_groups(region))

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        return self._call(lambda: self._provisioner().key_pairs(region))

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        return self._call(lambda: self._provisioner().default_image(region, workload))

    # ------------------------------------------------------------------ launching
    def launcher(self) -> Launcher:
        catalog = self._catalog or self.catalog()
        return Launcher(self._provisioner(), catalog, self.service.offerings, clock=self.clock)

    def dry_run(self, spec: LaunchSpec) -> None:
        """Ask the cloud whether ``spec`` would launch. Raises :class:`ActionError` with its answer."""
        problems = validate(spec)
        if problems:
            field, message = next(iter(problems.items()))
            raise ActionError(f"{field}: {message}")
        self._call(lambda: self.launcher().dry_run(spec))

    def launch(self, spec: LaunchSpec, on_attempt: Callable[[LaunchAttempt], None] | None = None,
               *, try_alternatives: bool = True, confirmation: str = "",
               extra: tuple[tuple[str, str], ...] = ()) -> LaunchResult:
        """Launch ``spec`` through the action path, trying other zones and similar types on
        capacity errors. ``confirmation`` and ``extra`` params name an automatic actor (the
        autopilot's rule and the figures that triggered it).

        Raises:
            LaunchFailed: every attempt failed (the attempts are on the exception).
            ActionError: denied, or the spec is invalid (recorded either way).
        """
        outcome: list[LaunchResult] = []

        def do() -> str:
            # Checked after the guard, so a denied launch is audited even with a bad spec.
            problems = validate(spec)
            if problems:
                field, message = next(iter(problems.items()))
                raise BackendError(f"{field}: {message}")
            result = self.launcher().launch(spec, on_attempt, try_alternatives=try_alternatives)
            outcome.append(result)
            if not result.ok:
                last = result.attempts[-1].message if result.attempts else "no attempt was made"
                raise BackendError(f"nothing launched after {len(result.attempts)} attempt(s); last: {last}")
            ids = ", ".join(i.instance_id for i in result.instances)
            final = result.spec or spec
            return f"launched {ids} ({final.instance_type}, {final.market.value}) in {final.availability_zone or final.region}"

        params = (("market", spec.market.value), ("count", str(spec.count)),
                  ("zone", spec.availability_zone), *((f"tag:{k}", v) for k, v in spec.tags),
                  ("encrypted", "yes" if spec.encrypted else "no"),
                  ("imds", "v2-required" if spec.imdsv2_required else "v1-allowed"), *extra)
        request = ActionRequest(ActionKind.LAUNCH, spec.instance_type, spec.region, confirmation, params)
        try:
            run_action(request, do, self.log, self.clock)
        except ActionError as exc:
            if outcome:
                raise LaunchFailed(str(exc), outcome[-1]) from exc
            raise
        return outcome[-1]

    # ------------------------------------------------------------------ instance actions
    def perform(self, request: ActionRequest) -> ActionResult:
        """Start, stop, power off (Azure: still billing), reboot or terminate an instance
        (confirmation checked first)."""
        verbs = {
            ActionKind.START: "start",
            ActionKind.STOP: "stop",
            ActionKind.POWER_OFF: "power_off",
            ActionKind.REBOOT: "reboot",
            ActionKind.TERMINATE: "terminate",
        }
        verb = verbs.get(request.kind)
        if verb is None:
            raise ActionError(f"{request.kind.value} is not an instance action")

        def do() -> str:
            act = getattr(self._provisioner(), verb, None)
            if act is None:
                raise BackendError(f"{request.kind.value} is not offered by this cloud (Azure only)")
            act(request.region, request.target)
            still = " (it still bills its compute until deallocated: stop deallocates)" if verb == "power_off" else ""
            return f"{request.kind.value} requested for {request.target}{still}"

        return run_action(request, do, self.log, self.clock)

    # ------------------------------------------------------------------ pricing what is polled
    def price_instances(self, instances: Iterable[Instance], now: float) -> tuple[Instance, ...]:
        """Fill GPU facts, $/h, billing spans and volumes where the backend left them out (real
        clouds report none of them), from the catalog, the cached spot prices and the runs
        CloudTrail and the polls show (:class:`RunBook`); CloudTrail is read in the background,
        once per instance."""
        catalog: Catalog | None = None
        out: list[Instance] = []
        unread: list[Instance] = []
        for inst in instances:
            # A backend with its own history (the simulator) bills its spans itself; a cloud that
            # prices its instances (Alibaba Cloud, Azure) has its runs priced here only where
            # its trail can say when they ran.
            if inst.accrued_cost or inst.billing or (inst.price_per_hour and self.runs.source is None):
                out.append(inst)
                continue
            catalog = catalog or self._catalog or _bundled()  # read only when an instance needs it
            itype = catalog.get(inst.instance_type)
            price = inst.price_per_hour or catalog.price(inst.instance_type, inst.region) or 0.0
            series: tuple[tuple[float, float], ...] = ()
            if inst.market is Market.SPOT and self._service is not None and not inst.price_per_hour:
                price = self._service.cached_spot_price(inst.instance_type, inst.availability_zone) or price
                series = self._service.cached_spot_series(inst.instance_type, inst.availability_zone)
            self.runs.observe(inst, now)
            if self.runs.needs_trail(inst):
                unread.append(inst)
            spans, basis = self.runs.spans(inst, series, price)
            out.append(replace(
                inst,
                price_per_hour=price,
                accrued_cost=spent_by(spans, spans[0].start, now) if spans else 0.0,
                billing=spans,
                history=basis,
                volumes=tuple(v for v in self.volumes if v.instance_id == inst.instance_id),
                gpus=inst.gpus or (itype.gpu_count if itype else 0),
                gpu_model=inst.gpu_model or (itype.gpu_model if itype else ""),
            ))
        if (unread or now - self._volumes_at >= VOLUMES_EVERY_S) and self.runs.source is not None:
            self._load_history_soon(unread, now)
        return tuple(out)

    def loose_volumes(self) -> tuple[Volume, ...]:
        """EBS volumes attached to no instance: they bill all the same."""
        return tuple(v for v in self.volumes if v.instance_id is None)

    def load_history(self, instances: Iterable[Instance], now: float) -> None:
        """Read CloudTrail for the instances not read yet, and the EBS volumes when due
        (blocking: a worker, or a command before it prices anything)."""
        instances = list(instances)
        for inst in instances:
            if self.runs.needs_trail(inst):
                self.runs.load_trail(inst, now)
        self._load_spot_series(instances)
        if now - self._volumes_at < VOLUMES_EVERY_S or not isinstance(self.backend, VolumeListing):
            return
        self._volumes_at = now
        watched = self.backend.regions if isinstance(self.backend, Regional) else ()
        regions = sorted({i.region for i in instances} | set(watched or ()))
        found: list[Volume] = []
        for region in regions:
            try:
                found.extend(self.backend.volumes(region))
            except BackendError as exc:  # optional: the volumes of that region go uncounted
                log.info("EBS volumes of %s unavailable: %s", region, one_line(exc))
        self.volumes = tuple(found)

    def _load_spot_series(self, instances: list[Instance]) -> None:
        """The spot price history of the spot instances' types (cached with the wizard's, so
        within its TTL this asks nothing): each interval is billed at the price then in force."""
        wanted: dict[str, set[str]] = {}
        for inst in instances:  # a cloud that priced its own instance said its spot price already
            if inst.market is Market.SPOT and inst.state.billed and not inst.price_per_hour:
                wanted.setdefault(inst.region, set()).add(inst.instance_type)
        if not wanted or not isinstance(self.backend, Provisioner):
            return
        for region, types in sorted(wanted.items()):
            try:
                self.service.spot_prices(region, tuple(sorted(types)))
            except BackendError as exc:  # the latest cached price stands in
                log.info("spot price history of %s unavailable: %s", region, one_line(exc))

    def _load_history_soon(self, instances: list[Instance], now: float) -> None:
        """:meth:`load_history` on a thread of its own (one at a time), then tell ``on_history``."""
        with self._history_lock:
            if self._history_worker is not None and self._history_worker.is_alive():
                return

            def run() -> None:
                try:
                    self.load_history(instances, now)
                except Exception:  # noqa: BLE001 - a backend that fails oddly: the history stays as it was
                    log.warning("reading the instances' history failed", exc_info=True)
                finally:
                    if self.on_history is not None:
                        self.on_history()

            self._history_worker = threading.Thread(target=run, name="cloud-history", daemon=True)
            self._history_worker.start()

    # ------------------------------------------------------------------ helpers
    def _provisioner(self) -> Provisioner:
        if not self.available:
            raise BackendError(NOT_A_CLOUD)
        return self.backend  # type: ignore[no-any-return]

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except BackendError as exc:
            raise ActionError(one_line(exc)) from exc


_BUNDLED: list[Catalog] = []


def _bundled() -> Catalog:
    if not _BUNDLED:
        _BUNDLED.append(bundled_catalog())
    return _BUNDLED[0]


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"
