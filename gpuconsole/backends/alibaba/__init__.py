"""Alibaba Cloud ECS behind the console's neutral cloud interfaces, through the official SDK
(``alibabacloud-ecs20140526`` on ``alibabacloud-tea-openapi``, credentials by
``alibabacloud-credentials``). Importing this package imports the SDK."""

from __future__ import annotations

from gpuconsole.backends.alibaba.mapping import backend_error, instance_from
from gpuconsole.backends.alibaba.source import AlibabaCloud, AlibabaSettings, published_types, split_endpoint

__all__ = ["AlibabaCloud", "AlibabaSettings", "backend_error", "instance_from", "published_types", "split_endpoint"]
