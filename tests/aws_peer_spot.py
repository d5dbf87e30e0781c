"""Spot requests as EC2 shows them, on top of moto: the piece moto leaves out, served in EC2's shape.

moto keeps spot requests with their type and interruption behaviour and answers
``DescribeSpotInstanceRequests`` as EC2 does, but its ``DescribeInstances`` leaves
``spotInstanceRequestId`` out of a spot instance, so nothing links the instance to its request.
:class:`SpotShapedProxy` sits in front of the fault proxy and adds that element to each spot
instance of moto's own ``DescribeInstances`` document, from moto's own requests; everything else
passes through untouched (and is still recorded by the fault proxy behind it).

moto also stops a one-time spot instance, which EC2 refuses: :func:`refuse_stopping_one_time`
makes the fault proxy answer such a ``StopInstances`` with EC2's ``UnsupportedOperation``.

Fixture: ``spot_peer`` (function): an :class:`~tests.aws_peer.AwsPeer` whose endpoint is the
spot-shaped proxy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.aws_peer import AwsPeer, FaultProxy, _describe, _reply

_INSTANCE_ID = re.compile(rb"<instanceId>(i-[0-9a-f]+)</instanceId>")


class SpotShapedProxy(FaultProxy):
    """Forwards to ``upstream`` (the fault proxy); adds ``spotInstanceRequestId`` to moto's
    ``DescribeInstances`` answers from the requests moto holds at ``moto_url``."""

    def __init__(self, upstream: str, peer: AwsPeer) -> None:
        super().__init__(upstream)
        self.peer = peer

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if _describe(handler, body).action != "DescribeInstances":
            super()._forward(handler, body)
            return
        status, headers, payload = self._fetch(handler, body)
        if status == 200:
            payload = with_request_ids(payload, self.request_ids())
        _reply(handler, status, headers, payload)

    def request_ids(self) -> dict[str, str]:
        """Instance id → the id of the spot request that launched it, as moto holds them."""
        answer = self.peer.client("ec2").describe_spot_instance_requests()["SpotInstanceRequests"]
        return {r["InstanceId"]: r["SpotInstanceRequestId"] for r in answer if r.get("InstanceId")}


def with_request_ids(document: bytes, request_ids: dict[str, str]) -> bytes:
    """``document`` with ``<spotInstanceRequestId>`` after each listed instance's own id (its
    first ``instanceId``; later ones belong to network interfaces and the like)."""
    seen: set[bytes] = set()

    def add(match: re.Match[bytes]) -> bytes:
        instance = match.group(1)
        request = request_ids.get(instance.decode())
        if request is None or instance in seen:
            return match.group(0)
        seen.add(instance)
        return match.group(0) + f"<spotInstanceRequestId>{request}</spotInstanceRequestId>".encode()

    return _INSTANCE_ID.sub(add, document)


def refuse_stopping_one_time(peer: AwsPeer, instance_id: str) -> None:
    """Answer a ``StopInstances`` of ``instance_id`` as EC2 does for a one-time spot instance."""
    peer.proxy.fail("StopInstances", "UnsupportedOperation",
                    f"You can't stop the Spot Instance '{instance_id}' because it is associated with a one-time "
                    "Spot Instance request. You can only stop Spot Instances associated with persistent Spot "
                    "Instance requests.", when={"InstanceId.1": instance_id})


def request_spot(peer: AwsPeer, kind: str, behaviour: str, tags: dict[str, str],
                 instance_type: str = "p4d.24xlarge") -> str:
    """Launch one spot instance through a spot request of ``kind`` (one-time, persistent) and
    interruption ``behaviour`` (terminate, stop), tag it, and return its instance id."""
    ec2: Any = peer.client("ec2")
    answer = ec2.request_spot_instances(
        InstanceCount=1, Type=kind, InstanceInterruptionBehavior=behaviour,
        LaunchSpecification={"ImageId": peer.image_id(), "InstanceType": instance_type})
    instance = answer["SpotInstanceRequests"][0]["InstanceId"]
    ec2.create_tags(Resources=[instance], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return instance


@pytest.fixture
def spot_peer(aws_peer: AwsPeer, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsPeer]:
    """``aws_peer`` seen through :class:`SpotShapedProxy`: boto3 reaches it first."""
    shaped = SpotShapedProxy(aws_peer.endpoint, aws_peer).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", shaped.url)
    try:
        yield aws_peer
    finally:
        shaped.stop()
