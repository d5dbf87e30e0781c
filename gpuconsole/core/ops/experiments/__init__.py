"""Experiments: one workload on several instance types, compared on cost per result.

    spec: the experiment file (TOML) read and checked, key by key.
    runs: one run's record; states.
    pricing: an arm's node price per hour, on-demand or spot.
    analysis: per-arm medians, means, bootstrap intervals, cost per unit of work, winners.
    store: experiments and runs in SQLite.
    runner: the scheduler (interleaved rounds, one retry, ``max_cost``), through the job path.
    measured: a measured arm as the cost calculator's inputs.
"""
