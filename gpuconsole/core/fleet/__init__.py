"""The fleet: what is seen, polled, cached and composed into one snapshot.

    console: the Console facade (the UI's and the command line's one door).
    hub: polls each source in its own thread with a timeout, supervises faults, keeps readings.
    sources: the one factory that decides which backend serves GPUs, jobs and the cloud.
    store, history, history_fill: the SQLite cache and GPU history (a cache: it can be deleted).
    prometheus_config: the fleet's Prometheus settings, flags over the config file.
    gpus_once: one reading of the GPU source for ``gpuconsole gpus --once``.
"""
