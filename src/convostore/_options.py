"""The options of opening a store, declared once.

:class:`StoreOptions` names every option :meth:`Sessions.open <convostore.Sessions.open>` takes
besides the URL, with its type, default and documentation. ``Sessions.open`` and the generated
``AsyncSessions.open`` take exactly these keywords (a test compares the signatures), their
``:param`` documentation is written from here (:func:`document_options`), and the
integrations' shared stores are opened and told apart with them.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from .backends.base import OpenOptions
from .feed._changes import DEFAULT_LOG_SIZE
from .tokens import TokenCounter

F = TypeVar("F", bound=Callable[..., Any])


def _doc(text: str) -> Any:
    return {"doc": " ".join(text.split())}


@dataclass(frozen=True)
class StoreOptions:
    """How to open a store: every keyword of :meth:`Sessions.open <convostore.Sessions.open>`.

    Each field's ``metadata["doc"]`` is its documentation; the engine options (those of
    :class:`~convostore.backends.base.OpenOptions`) reach the engine, the others the store.
    """

    reserved_metadata_keys: Iterable[str] = field(default=(), metadata=_doc(
        """metadata keys stripped from ``source="client"`` writes."""))
    durability: Literal["normal", "full"] = field(default="normal", metadata=_doc(
        """SQLite only: ``"normal"`` (WAL, synchronous=NORMAL; safe against a crash of the
        process) or ``"full"`` (fsync at every commit)."""))
    busy_timeout: float = field(default=30.0, metadata=_doc(
        """seconds a writer waits for another writer's lock."""))
    token_counter: TokenCounter | None = field(default=None, metadata=_doc(
        """a function counting the tokens of a string (e.g. tiktoken), used instead of the
        heuristic for row estimates and summaries."""))
    pool: Any = field(default=None, metadata=_doc(
        """PostgreSQL only: an open ``psycopg_pool.ConnectionPool`` to use instead of a URL
        (the store does not close it)."""))
    pool_size: int = field(default=10, metadata=_doc(
        """PostgreSQL only: most connections of the pool the store creates."""))
    schema: str | None = field(default=None, metadata=_doc(
        """PostgreSQL only: the schema holding the tables (created if missing)."""))
    change_log_size: int | None = field(default=DEFAULT_LOG_SIZE, metadata=_doc(
        """how many of the newest changes the durable change log keeps (:meth:`changes`,
        :meth:`watch`); older ones are trimmed in the background. None keeps every
        change."""))
    listen_url: str | None = field(default=None, metadata=_doc(
        """PostgreSQL only: a direct URL to the server for the connection that ``LISTEN``
        for watchers, when the store's URL goes through a transaction-mode pooler (which
        cannot carry ``LISTEN``). Default: the store's URL."""))
    partitions: int | None = field(default=None, metadata=_doc(
        """PostgreSQL only: create the session-keyed tables hash-partitioned by session id
        into this many partitions (2 to 1024), when the schema is created; a store created
        without partitions cannot be opened with them (nor the other way round, nor with
        another count). See ``docs/scaling.md``."""))
    transaction_pooler: bool | None = field(default=None, metadata=_doc(
        """PostgreSQL only: the URL reaches the server through a transaction-mode pooler
        such as PgBouncer: no prepared statements, no session state (the schema is set
        inside every transaction, never on the connection). A pooler cannot be told from a
        server reliably, so say it; see ``docs/scaling.md``."""))
    search_tool_output: bool = field(default=False, metadata=_doc(
        """also index the text of tool results (a tool part's ``output``, or
        ``errorText``), so a search finds what tools returned. Off by default: it grows the
        index, by about the size of the tool outputs' text. It is recorded when the search
        index is created, and the index keeps it: a store opened with the other value
        follows the index's (with a warning)."""))

    def engine_options(self) -> dict[str, Any]:
        """The options that reach the engine (``open_backend``'s keywords)."""
        return {name: getattr(self, name) for name in ENGINE_OPTIONS}

    def store_options(self) -> dict[str, Any]:
        """The options the store itself keeps (``Sessions``' keywords)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ENGINE_OPTIONS}


ENGINE_OPTIONS = frozenset(f.name for f in dataclasses.fields(OpenOptions))
"""The options an engine receives; the rest shape the store."""


def document_options(fn: F) -> F:
    """Append a ``:param`` line per option of :class:`StoreOptions` to ``fn``'s docstring."""
    lines = [f":param {f.name}: {f.metadata['doc']}" for f in dataclasses.fields(StoreOptions)]
    fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n\n" + "\n".join(lines) + "\n"
    return fn
