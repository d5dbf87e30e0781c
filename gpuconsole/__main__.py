"""``python -m gpuconsole``: the same entry point as the ``gpuconsole`` command."""

from gpuconsole.cli.main import main

raise SystemExit(main())
