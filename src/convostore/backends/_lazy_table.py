"""A table created on first need, known to exist once it has been seen.

The search index and the session manager's registry are not created when a store opens: a
store that never searches or registers anything never has them. Until such a table is seen,
each scope that cares asks the catalog; once it exists it stays (nothing drops it while a store
is open), so the answer is remembered and the question is not asked again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .base import Backend, Ops


class LazyTable:
    """Whether a table exists, remembered once true, and its creation on first need."""

    def __init__(
        self,
        backend: Backend,
        exists: Callable[[Ops], bool],
        create: Callable[[Ops], None],
    ) -> None:
        """:param exists: asks the catalog inside a scope.
        :param create: creates the table inside the write scope of :meth:`ensure`; that
            scope holds every writer of the store, so it must stay short (the search index is
            filled afterwards, in steps of its own).
        """
        self._backend = backend
        self._exists = exists
        self._create = create
        self._known = False
        self._lock = threading.Lock()

    @property
    def known(self) -> bool:
        """Has the table been seen? (Then :meth:`ready` asks nothing.)"""
        return self._known

    def ready(self, ops: Ops) -> bool:
        """Does the table exist? A catalog query in ``ops`` until the answer is yes."""
        if not self._known and self._exists(ops):
            self._known = True
        return self._known

    def ensure(self) -> None:
        """Create the table unless it exists (checked again inside the write scope, since
        another process may have created it meanwhile)."""
        if self._known:
            return
        with self._lock:
            with self._backend.read() as ops:
                if self.ready(ops):
                    return
            with self._backend.write(None) as ops:
                if not self._exists(ops):
                    self._create(ops)
            self._known = True
