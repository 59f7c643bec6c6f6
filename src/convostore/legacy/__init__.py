"""Databases written by the reference system, lifted in place on open."""
