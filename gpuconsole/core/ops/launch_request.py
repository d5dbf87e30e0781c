"""The EC2 request and Terraform block a launch would send, rendered for reading.

The launch wizard's review step and ``instance launch --dry-run``-style output show these: the
``RunInstances`` request as JSON and the equivalent ``aws_instance`` block, both built from the
very :class:`~gpuconsole.model.LaunchSpec` the launch sends. The UI reaches them here, through
the core, rather than in the AWS backend that builds them.
"""

from __future__ import annotations

from gpuconsole.backends.registry import launch_request_json as request_json
from gpuconsole.backends.registry import launch_terraform_block as terraform_block

__all__ = ["request_json", "terraform_block"]
