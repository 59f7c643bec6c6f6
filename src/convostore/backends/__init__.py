"""Storage engines: one module per engine, SQL only (see base.py for the contract)."""
