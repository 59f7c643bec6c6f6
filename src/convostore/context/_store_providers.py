"""Providers kept in the convostore database itself, through the public session API only.

:class:`StoreContextProvider` keeps one block's text as one message in the session
``convostore:context:<key>``; :class:`StoreSearchProvider` keeps entries as text messages in
``convostore:search:<label>`` and finds them with that session's full-text search. Each has an
async twin; both faces run the same op generators.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._ops import Call, Gen, arun, run

RESERVED_PREFIX = "convostore:"
"""Session ids starting with this are used by :mod:`convostore.context` for its own data."""
CONTEXT_PREFIX = "convostore:context:"
"""Session id prefix of a :class:`StoreContextProvider` key (blocks and cached prompts)."""
SEARCH_PREFIX = "convostore:search:"
"""Session id prefix of a :class:`StoreSearchProvider` label."""

_CONTENT_ID = "content"
_CONTENT_PART = "data-convostore-context"
_SEARCH_LIMIT = 10
_WORD_CANDIDATES = 500


def _content_message(content: str) -> dict[str, Any]:
    return {
        "id": _CONTENT_ID,
        "role": "system",
        "parts": [{"type": _CONTENT_PART, "data": {"content": content}}],
    }


def _content_of(message: object) -> str | None:
    if not isinstance(message, dict):
        return None
    for part in message.get("parts") or ():
        if isinstance(part, dict) and part.get("type") == _CONTENT_PART:
            data = part.get("data")
            if isinstance(data, dict) and isinstance(data.get("content"), str):
                content: str = data["content"]
                return content
    return None


class _StoreBacked:
    """Shared by the store-backed providers: a name that defaults to the block's label.

    The data lives in the reserved session ``<prefix><name>``. A subclass sets ``_prefix`` and
    ``_noun``, what its name is called (``key`` or ``label``).
    """

    _prefix: ClassVar[str]
    _noun: ClassVar[str]

    def __init__(self, store: Any, name: str | None) -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"{self._noun} must be a non-empty string, not {name!r}")
        self._store = store
        self._name = name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._noun}={self._name!r}>"

    def init(self, label: str) -> None:
        """Use the block's ``label`` as the name of the stored data, unless one was given."""
        if self._name is None:
            self._name = label

    def _handle(self) -> Gen[Any]:
        if self._name is None:
            raise ValueError(f"{type(self).__name__} needs a {self._noun} (or an init(label) call)")
        handle = yield Call(self._store.session, (self._prefix + self._name,))
        return handle


class _StoreContextBase(_StoreBacked):
    """The behaviour of :class:`StoreContextProvider` and its async twin, as op generators."""

    _prefix = CONTEXT_PREFIX
    _noun = "key"

    def __init__(
        self, store: Any, key: str | None = None, *, belongs_to: str | None = None
    ) -> None:
        super().__init__(store, key)
        self._belongs_to = belongs_to
        self._linked = belongs_to is None

    @property
    def key(self) -> str | None:
        """The key naming the stored text (``None`` until given or set by :meth:`init`)."""
        return self._name

    def _get(self) -> Gen[str | None]:
        handle = yield from self._handle()
        message = yield Call(handle.get_message, (_CONTENT_ID,))
        return _content_of(message)

    def _set(self, content: str) -> Gen[None]:
        if not isinstance(content, str):
            raise TypeError(f"content must be a string, not {type(content).__name__}")
        handle = yield from self._handle()
        yield Call(handle.upsert_message, (_content_message(content),))
        if not self._linked:  # deleted with its conversation (Sessions.delete_session)
            yield Call(handle.update_info, (), {"belongs_to": self._belongs_to})
            self._linked = True


class StoreContextProvider(_StoreContextBase):
    """A writable block kept in the store: the default provider of :meth:`Context.with_context`.

    :param store: a :class:`~convostore.Sessions`.
    :param key: names the stored text (session ``convostore:context:<key>``); when omitted, the
        block label passed to :meth:`init` is used.
    :param belongs_to: the conversation the text serves: the first ``set()`` records it in the
        directory, so :meth:`~convostore.Sessions.delete_session` of that conversation deletes
        this text too (:class:`Context` passes its session).

    ``get()`` is one point read; ``set()`` is one upsert (nothing is written when unchanged).
    An empty string is a value, distinct from None (nothing stored).
    """

    def get(self) -> str | None:
        """The stored text, or None when nothing was stored."""
        return run(self._get())

    def set(self, content: str) -> None:
        """Store ``content``, replacing what was there."""
        run(self._set(content))


class AsyncStoreContextProvider(_StoreContextBase):
    """Async twin of :class:`StoreContextProvider`, over a :class:`~convostore.AsyncSessions`."""

    async def get(self) -> str | None:
        """Async twin of :meth:`StoreContextProvider.get`."""
        return await arun(self._get())

    async def set(self, content: str) -> None:
        """Async twin of :meth:`StoreContextProvider.set`."""
        await arun(self._set(content))


def _search_words(query: str) -> list[str]:
    return [w for w in query.split() if any(c.isalnum() for c in w)]


class _StoreSearchBase(_StoreBacked):
    """The behaviour of :class:`StoreSearchProvider` and its async twin, as op generators."""

    _prefix = SEARCH_PREFIX
    _noun = "label"

    def __init__(self, store: Any, label: str | None = None, *, limit: int = _SEARCH_LIMIT) -> None:
        super().__init__(store, label)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise TypeError(f"limit must be a positive int, not {limit!r}")
        self._limit = limit

    @property
    def label(self) -> str | None:
        """The label the entries are kept under (``None`` until given or set by :meth:`init`)."""
        return self._name

    def _get(self) -> Gen[str | None]:
        handle = yield from self._handle()
        # Entries form one chain (each upsert attaches to the active leaf), so the path is the
        # whole collection; row stats count it without reading any content.
        stats = yield Call(handle.get_history_row_stats)
        return f"{len(stats)} entries indexed." if stats else None

    def _set(self, key: str, content: str) -> Gen[None]:
        if not isinstance(key, str) or not key:
            raise TypeError(f"an entry key must be a non-empty string, not {key!r}")
        if key.startswith("compaction_"):
            raise ValueError(f"entry key {key!r}: keys starting with 'compaction_' are reserved")
        if not isinstance(content, str):
            raise TypeError(f"content must be a string, not {type(content).__name__}")
        handle = yield from self._handle()
        message = {"id": key, "role": "system", "parts": [{"type": "text", "text": content}]}
        yield Call(handle.upsert_message, (message,))

    def _search(self, query: str) -> Gen[str | None]:
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, not {type(query).__name__}")
        words = _search_words(query)
        if not words:
            return None
        handle = yield from self._handle()
        limit = self._limit
        # The session search matches its query as one phrase; entries must match every word,
        # in any order. Phrase hits rank first, then entries holding each word separately.
        hits = list((yield Call(handle.search, (query,), {"limit": limit})))
        if len(words) > 1 and len(hits) < limit:
            seen = {h.id for h in hits}
            common: list[Any] | None = None
            for word in words:
                found = yield Call(handle.search, (word,), {"limit": _WORD_CANDIDATES})
                if common is None:
                    common = list(found)
                else:
                    ids = {h.id for h in found}
                    common = [h for h in common if h.id in ids]
                if not common:
                    break
            for h in common or ():
                if h.id not in seen and len(hits) < limit:
                    hits.append(h)
                    seen.add(h.id)
        if not hits:
            return None
        return "\n\n".join(f"[{h.id}]\n{h.content}" for h in hits)


class StoreSearchProvider(_StoreSearchBase):
    """Searchable entries kept in the store, found with its full-text search.

    :param store: a :class:`~convostore.Sessions`.
    :param label: the collection's name (session ``convostore:search:<label>``); when omitted,
        the block label passed to :meth:`init` is used, so one provider class serves any block.
    :param limit: most hits :meth:`search` returns (10, as the reference).

    Full-text search is FTS5 on SQLite and ``tsvector`` on PostgreSQL (whatever the store's
    session search uses); a query matches entries holding all of its words. Entries holding the
    words as a phrase rank first; for words apart, candidates are the best 500 matches of each
    word, so in a very large collection a rare combination of common words can be missed.
    """

    def get(self) -> str | None:
        """``"<n> entries indexed."``, or None when there are none."""
        return run(self._get())

    def set(self, key: str, content: str) -> None:
        """Add the entry ``key``, or replace its content."""
        run(self._set(key, content))

    def search(self, query: str) -> str | None:
        """The best hits as ``[key]\\ncontent`` joined by a blank line, or None."""
        return run(self._search(query))


class AsyncStoreSearchProvider(_StoreSearchBase):
    """Async twin of :class:`StoreSearchProvider`, over a :class:`~convostore.AsyncSessions`."""

    async def get(self) -> str | None:
        """Async twin of :meth:`StoreSearchProvider.get`."""
        return await arun(self._get())

    async def set(self, key: str, content: str) -> None:
        """Async twin of :meth:`StoreSearchProvider.set`."""
        await arun(self._set(key, content))

    async def search(self, query: str) -> str | None:
        """Async twin of :meth:`StoreSearchProvider.search`."""
        return await arun(self._search(query))
