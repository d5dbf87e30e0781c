"""The names the command line offers for each source, and the AWS region check.

Kept apart from :mod:`gpuconsole.core.fleet.sources` (which builds the backends) so that parsing
the command line imports no backend: the console's first frame waits on it.
"""

from __future__ import annotations

import re

GPU_SOURCES = ("auto", "nvml", "sim", "prometheus", "off")
CLOUD_SOURCES = ("auto", "aws", "off")
JOB_SOURCES = ("auto", "kube", "off")

REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$")


def check_region(name: str) -> str:
    """``name`` if it looks like an AWS region; ValueError with one line otherwise."""
    if not REGION_RE.match(name):
        raise ValueError(f"not an AWS region: {name!r} (e.g. us-east-1)")
    return name
