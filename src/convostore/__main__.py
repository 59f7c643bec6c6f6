"""``python -m convostore``: the command line (see :mod:`convostore.cli`)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
