"""The names the command line offers for each source, and the AWS region check.

Kept apart from :mod:`gpuconsole.core.fleet.sources` (which builds the backends) so that parsing
the command line imports no backend: the console's first frame waits on it.
"""

from __future__ import annotations

import re

GPU_SOURCES = ("auto", "nvml", "sim", "prometheus", "off")
CLOUD_SOURCES = ("auto", "aws", "alibaba", "azure", "off")
CLOUDS = ("aws", "alibaba", "azure")  # the clouds ``--cloud`` may list together (``aws,alibaba``)
JOB_SOURCES = ("auto", "kube", "off")

REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$")


def check_cloud(text: str) -> str:
    """``--cloud``'s value: one of :data:`CLOUD_SOURCES`, or clouds listed with commas
    (``aws,alibaba``); ValueError with one line otherwise."""
    if text in CLOUD_SOURCES:
        return text
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    wrong = [n for n in names if n not in CLOUDS]
    if wrong:  # a provider registered beyond the built-in ones (the registry imports no driver)
        from gpuconsole.backends.registry import cloud_names

        wrong = [n for n in names if n not in cloud_names()]
    if not names or wrong:
        raise ValueError(f"unknown cloud {(wrong or [text])[0]!r}: choose one of {', '.join(CLOUD_SOURCES)}, "
                         f"or a list such as aws,alibaba")
    return ",".join(names)


def check_region(name: str) -> str:
    """``name`` if it looks like an AWS region; ValueError with one line otherwise."""
    if not REGION_RE.match(name):
        raise ValueError(f"not an AWS region: {name!r} (e.g. us-east-1)")
    return name
