"""Azure virtual machines behind the console's neutral cloud interfaces, through the official
SDKs (``azure-mgmt-compute``, ``azure-mgmt-resource``, ``azure-mgmt-authorization``; credentials
by ``azure-identity``). Importing this package imports none of them: they load on first use."""

from __future__ import annotations

from gpuconsole.backends.azure.mapping import SIZES, backend_error, gpu_model, instance_from, published_types
from gpuconsole.backends.azure.source import AzureCloud, AzureSettings, check_url

__all__ = ["SIZES", "AzureCloud", "AzureSettings", "backend_error", "check_url", "gpu_model", "instance_from", "published_types"]
