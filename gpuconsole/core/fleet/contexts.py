"""The kubeconfig contexts of the jobs source, and the source for another one (like k9s ``:ctx``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuconsole.backends import registry
from gpuconsole.backends.base import BackendError, KubeconfigContexts
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.ops.actions import ActionError, one_line
from gpuconsole.model import SourceKind


def kube_contexts(source: object) -> tuple[tuple[str, ...], str | None]:
    """The kubeconfig's contexts and the one ``source`` uses (reads files: call from a worker).

    Raises:
        ActionError: no Kubernetes source, or a kubeconfig that cannot be read.
    """
    if not isinstance(source, KubeconfigContexts) or not source.name.startswith("kube"):
        raise ActionError("the jobs source is not a Kubernetes cluster")
    try:
        names, current = registry.kube_contexts(source)
    except BackendError as exc:
        raise ActionError(one_line(exc)) from exc
    return names, source.context or current


def context_source(source: object, options: SourceOptions, name: str,
                   clock: Callable[[], float]) -> tuple[SourceOptions, Any]:
    """The source options with context ``name``, and the jobs source that watches it.

    Raises:
        ActionError: a context the kubeconfig lacks (or no Kubernetes source at all).
    """
    names, _ = kube_contexts(source)
    if name not in names:
        raise ActionError(f"no context {name!r} in the kubeconfig: {', '.join(names) or 'none'}")
    options = replace(options, context=name)
    return options, registry.build(SourceKind.JOBS, "kube", options, clock=clock)
