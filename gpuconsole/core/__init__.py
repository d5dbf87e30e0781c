"""The core: the only door to change anything, and the one place where sources are joined.

The UI and the command line call the same core functions, so a permission, an audit record or a
validation is never skipped by using the other door. Nothing here imports Textual, and the core
reaches the backends only through ``gpuconsole.backends.base`` and each adapter folder's face.

Its folders import each other downwards only, in this order (checked by import-linter):

    fleet/   the Console facade, the Hub that polls sources, source selection, the Store
    access/  roles and the users table, the guard of the action path, MFA, the audit log
    ops/     the one action path and the instance, job, GPU and budget operations
    money/   costs, budgets and their evaluation, the catalog, the calculator, Cost Explorer
    config.py, paths.py   the config file, and where files live
"""
