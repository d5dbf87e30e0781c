"""The autopilot's hands: each decision becomes requests of the one action path.

Every request is confirmed as ``autopilot:<rule>`` and carries the rule and the figures that
triggered it, so the audit log says which rule acted and on what evidence. The login running
the service must be allowed to act (an admin of the users table): the autopilot has no more
rights than the one who runs it.
"""

from __future__ import annotations

from msgspec.structs import replace

from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionRequest, autopilot_confirmation
from gpuconsole.core.ops.autopilot.engine import ActionFailed
from gpuconsole.core.ops.autopilot.rules import Rule
from gpuconsole.core.ops.cloud_ops import CloudOps
from gpuconsole.core.ops.service_ops import ServiceOps
from gpuconsole.model import Instance, LaunchSpec, Market, Service, Workload

REPLACES_TAG = "gpuconsole:replaces"


class CloudActuator:
    """Carries decisions out through :class:`CloudOps` (AWS or the simulated cloud) and, for
    serve-scale rules, :class:`ServiceOps` (the cluster's scale subresource)."""

    def __init__(self, cloud: CloudOps, services: ServiceOps | None = None) -> None:
        self.cloud = cloud
        self.services = services

    @staticmethod
    def _params(rule: Rule, figures: str) -> tuple[tuple[str, str], ...]:
        return (("rule", rule.name), ("figures", figures))

    def launch(self, rule: Rule, count: int, figures: str) -> str:
        if rule.launch is None:
            raise ActionFailed(f"rule {rule.name} has no launch spec")
        return self._launch(rule, replace(rule.launch, count=count), figures, try_alternatives=False)

    def stop(self, rule: Rule, inst: Instance, terminate: bool, figures: str) -> str:
        kind = ActionKind.TERMINATE if terminate else ActionKind.STOP
        request = ActionRequest(kind, inst.instance_id, inst.region, autopilot_confirmation(rule.name),
                                (*self._params(rule, figures), ("market", inst.market.value)))
        try:
            return self.cloud.perform(request).message
        except ActionError as exc:
            raise ActionFailed(str(exc)) from exc

    def scale_service(self, rule: Rule, service: Service, replicas: int, figures: str) -> str:
        if self.services is None:
            raise ActionFailed("this console cannot change services (no cluster is connected)")
        try:
            return self.services.scale(service, replicas, rule=rule.name, reason=figures).message
        except ActionError as exc:
            raise ActionFailed(str(exc)) from exc

    def relaunch(self, rule: Rule, inst: Instance, on_demand: bool, figures: str) -> str:
        """The same type, image (where its cloud says; else the default one) and tags, in the next
        zone that offers it (any zone when on demand)."""
        try:
            image = inst.image_id or self.cloud.default_image(inst.region, Workload.TRAINING).image_id
            zones = self.cloud.offerings(inst.region, (inst.instance_type,)).get(inst.instance_type, ())
        except ActionError as exc:
            raise ActionFailed(str(exc)) from exc
        zone = "" if on_demand else next_zone(tuple(zones), inst.availability_zone)
        tags = tuple((k, v) for k, v in inst.tags if k != REPLACES_TAG) + ((REPLACES_TAG, inst.instance_id),)
        spec = LaunchSpec(inst.region, inst.instance_type, image, Market.ON_DEMAND if on_demand else Market.SPOT,
                          availability_zone=zone, tags=tags)
        return self._launch(rule, spec, figures, try_alternatives=False,
                            extra=(("replaces", inst.instance_id),))

    def _launch(self, rule: Rule, spec: LaunchSpec, figures: str, *, try_alternatives: bool,
                extra: tuple[tuple[str, str], ...] = ()) -> str:
        try:
            result = self.cloud.launch(spec, try_alternatives=try_alternatives,
                                       confirmation=autopilot_confirmation(rule.name),
                                       extra=(*self._params(rule, figures), *extra))
        except ActionError as exc:
            raise ActionFailed(str(exc)) from exc
        final = result.spec or spec
        ids = ", ".join(i.instance_id for i in result.instances)
        return f"launched {ids} ({final.instance_type}, {final.market.value}) in {final.availability_zone or final.region}"


def next_zone(zones: tuple[str, ...], interrupted: str) -> str:
    """The zone after ``interrupted`` in order (wrapping), never ``interrupted`` itself; '' when
    no other zone offers the type (the launcher then lets the cloud choose)."""
    others = sorted(z for z in zones if z != interrupted)
    if not others:
        return ""
    later = [z for z in others if z > interrupted]
    return later[0] if later else others[0]
