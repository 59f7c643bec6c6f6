"""The tree's arithmetic that deletion needs: where the children of deleted rows go."""

from __future__ import annotations

from collections.abc import Mapping


def kept_ancestors(parents: Mapping[str, str | None]) -> dict[str, str | None]:
    """For each doomed id (the keys of ``parents``, each mapped to its parent), the nearest
    ancestor that is not doomed: None when every ancestor is doomed.

    Each id is resolved once and remembered, so a run of any length costs one step per id, and
    there is no step limit: a cycle among doomed ids (possible only through verbatim imports)
    is noticed by the walk itself and resolves to None.
    """
    resolved: dict[str, str | None] = {}
    for start in parents:
        trail: list[str] = []
        on_trail: set[str] = set()
        node: str | None = start
        while node is not None and node in parents and node not in resolved:
            if node in on_trail:
                node = None  # a cycle: no kept ancestor
                break
            on_trail.add(node)
            trail.append(node)
            node = parents[node]
        answer = resolved[node] if node is not None and node in resolved else node
        for doomed in trail:
            resolved[doomed] = answer
    return resolved
