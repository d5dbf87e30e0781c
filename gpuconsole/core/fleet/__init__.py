"""The fleet: what is seen, polled, cached and composed into one snapshot.

    console: the Console, the UI's and the command line's one small door.
    services, wiring, options: the session's collaborators as one frozen set, and how it is built.
    compose, alerts, cron_memo: a snapshot from the readings and the services; its alerts.
    coalescer, periodic: when to compose; the named periodic jobs (billing, key hygiene).
    hub: polls each source on one long-lived worker with a timeout, supervises faults, keeps readings.
    sources, contexts: which registry source serves GPUs, jobs and the cloud; kubeconfig contexts.
    cache, store, history, history_fill: the SQLite cache and GPU history (it can be deleted).
    prometheus_config: the fleet's Prometheus settings, flags over the config file.
    gpus_once: one reading of the GPU source for ``gpuconsole gpus --once``.
"""
