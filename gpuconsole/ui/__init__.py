"""The Textual console: it renders snapshots from ``gpuconsole.core`` and sends every change back
through it; it never imports a backend or a driver.

Its modules import each other one way, top to bottom:

    app: the App (top bar, pane tabs, keys, the snapshot each pane is shown).
    commands: the command palette's providers, one per domain.
    panes/: overview, GPUs, jobs, instances, budgets, audit (one module and .tcss each).
    access: asking for an MFA code before a guarded action.
    screens/, wizards/: dialogs, detail views, the calculator; the launch and job-submit wizards.
    widgets/, protocols: tables and text views; the app's type as screens see it.
    format, messages, palette, themes: words and numbers, messages, colours, theme files.
"""
