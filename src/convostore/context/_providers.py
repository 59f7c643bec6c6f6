"""Where context blocks get their content: provider protocols and the built-in providers.

A provider's kind is read from its shape, never from a base class:

- ``get()`` only: a read-only block (:class:`ContextProvider`);
- ``get()`` + ``set(content)``: writable through ``set_context`` (:class:`WritableContextProvider`);
- ``get()`` + ``load(key)`` (+ optional ``set(key, content, description=None)``): a skill
  collection whose ``get()`` lists the documents (:class:`SkillProvider`);
- ``get()`` + ``search(query)`` (+ optional ``set(key, content)``): a searchable collection whose
  ``get()`` is a summary (:class:`SearchProvider`);
- any of them may also have ``init(label)``, called with the block's label before each load.

Each method may be sync or return an awaitable; both faces of the context accept either.

Built-ins kept in the convostore database itself, through the public session API only:

- :class:`StoreContextProvider` -- one block's text, as one message (id ``content``, a
  ``data-convostore-context`` part, so the text stays out of the message search index) in the
  session ``convostore:context:<key>``. The default provider of a block, and the prompt cache.
- :class:`StoreSearchProvider` -- entries as text messages (id = entry key) in the session
  ``convostore:search:<label>``, searched with that session's full-text search.
- :class:`DirectorySkillProvider` -- one file per skill in a directory.

The protocols live here; the store-backed providers in ``_store_providers.py``, the directory
one in ``_skill_files.py``.

Session ids starting with ``convostore:`` (:data:`RESERVED_PREFIX`) are reserved for this module:
they never appear in ``Sessions.list_sessions()``, the directory or cross-session search, and a
block's text and cached prompt are deleted with the conversation they serve.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar, Union, runtime_checkable

T = TypeVar("T")
MaybeAwaitable = Union[T, Awaitable[T]]  # noqa: UP007 (a runtime alias: `|` cannot hold a TypeVar here)
"""A provider method may return its value or an awaitable of it."""


@runtime_checkable
class ContextProvider(Protocol):
    """A read-only block: ``get()`` returns its text, or None for an empty block."""

    def get(self) -> MaybeAwaitable[str | None]:
        """The block's current content."""
        ...


@runtime_checkable
class WritableContextProvider(Protocol):
    """A block the model may rewrite: ``set(content)`` stores the whole text."""

    def get(self) -> MaybeAwaitable[str | None]:
        """The block's current content."""
        ...

    def set(self, content: str) -> MaybeAwaitable[None]:
        """Replace the block's content."""
        ...


@runtime_checkable
class SkillProvider(Protocol):
    """A collection of documents loaded on demand; ``get()`` returns the listing.

    An optional ``set(key, content, description=None)`` lets the model add documents.
    """

    def get(self) -> MaybeAwaitable[str | None]:
        """The listing shown in the prompt, e.g. ``- pirate-style: Talk like a pirate``."""
        ...

    def load(self, key: str) -> MaybeAwaitable[str | None]:
        """The full document, or None when there is none under ``key``."""
        ...


@runtime_checkable
class SearchProvider(Protocol):
    """A searchable collection; ``get()`` returns a summary, ``search()`` the rendered hits.

    An optional ``set(key, content)`` lets the model add or replace entries.
    """

    def get(self) -> MaybeAwaitable[str | None]:
        """A one-line summary, e.g. ``"3 entries indexed."``."""
        ...

    def search(self, query: str) -> MaybeAwaitable[str | None]:
        """The hits as text, or None when nothing matches."""
        ...


def is_writable(provider: object) -> bool:
    """A provider is writable when it has a callable ``set``."""
    return callable(getattr(provider, "set", None))


def is_skill(provider: object) -> bool:
    """A provider is a skill collection when it has a callable ``load``."""
    return callable(getattr(provider, "load", None))


def is_searchable(provider: object) -> bool:
    """A provider is searchable when it has a callable ``search``."""
    return callable(getattr(provider, "search", None))
