"""gpuconsole: one keyboard-first screen for GPUs, job queues, cloud instances and budgets."""

__version__ = "0.1.0"
