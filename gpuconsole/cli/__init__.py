"""The command line: ``gpuconsole`` opens the console, its subcommands serve scripts and cron.

One module per command family; ``main`` is the entry point (``gpuconsole.cli.main:main``),
``parser`` reads the arguments, the others build their own sub-parsers and run them:

    main, parser: the entry point and the console itself; the flags and the parsers.
    snapshot, gpus, process: the fleet once (text or JSON), this host's GPUs, a GPU process killed.
    instance, job: cloud instances and Kubernetes jobs changed from a script.
    budget, cost: budgets added, listed and checked; own hardware vs cloud compared.
    users, audit, access, access_parsers: the users table and MFA, the audit log, the guard's options.
    exporter: the simulated fleet as a DCGM-exporter ``/metrics`` endpoint.
    table: tables and lines that fit 80 columns (``--wide``: whole), shared by every command.

Every command goes through the same ``gpuconsole.core`` calls as the console.
"""
