"""Storage engines: one module per engine, SQL only.

``base.py`` is the contract (the ``Backend`` and ``Ops`` protocols, the ``Engine`` declaration),
``_engines.py`` the registry that picks an engine for a URL, ``_sql.py`` the SQL both engines
share, ``_migrate.py`` the one migration runner. ``docs/engines.md`` explains how an engine
plugs in.
"""
