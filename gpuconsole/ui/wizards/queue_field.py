"""The submit wizard's Queue field: the namespace's Kueue LocalQueues (each with its ClusterQueue's
free quota) and the cluster's Volcano queues, from the snapshot on screen.

It follows the Namespace field: another namespace offers its own LocalQueues, and a choice it no
longer offers goes back to none. A cluster without Kueue or Volcano gets no field at all, so the
form is what it was. The value (``kueue:NAME``, ``volcano:NAME`` or empty) is read into the
request by :func:`gpuconsole.core.ops.manifests.from_form`.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Input, Select

from gpuconsole.core.ops.queue_manifest import NO_QUEUE, queue_choices
from gpuconsole.model import Queue
from gpuconsole.ui.format import inert
from gpuconsole.ui.wizards.fields import Field

NAMESPACE_INPUT = "#job-namespace"


def _options(queues: tuple[Queue, ...], namespace: str) -> list[tuple[Text, str]]:
    return [(Text(inert(choice.label)), choice.value) for choice in queue_choices(queues, namespace.strip())]


class QueueField(Field):
    """``Queue``: where the job waits for its turn (see the module's words)."""

    def __init__(self, queues: tuple[Queue, ...], namespace: str) -> None:
        self.queues = queues
        select: Select[str] = Select(_options(queues, namespace), value=NO_QUEUE.value, allow_blank=False,
                                     compact=True, id="job-queue")
        super().__init__("Queue", select, "queue")

    def on_mount(self) -> None:
        super().on_mount()
        namespace = self.screen.query(NAMESPACE_INPUT).first(Input) if self.screen.query(NAMESPACE_INPUT) else None
        if namespace is not None:
            self.watch(namespace, "value", self.namespace_changed)

    def namespace_changed(self, namespace: str) -> None:
        select = self.widget
        assert isinstance(select, Select)
        chosen = select.value
        options = _options(self.queues, namespace)
        select.set_options(options)
        select.value = chosen if any(value == chosen for _label, value in options) else NO_QUEUE.value


def queue_fields(snapshot: object, namespace: str) -> list[QueueField]:
    """The Queue field for a form of ``namespace``, or none when the cluster has no queues."""
    queues = getattr(snapshot, "queues", ())
    return [QueueField(tuple(queues), namespace)] if queues else []
