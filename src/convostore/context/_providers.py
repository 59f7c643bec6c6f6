"""Where context blocks get their content: provider protocols and the built-in providers.

A provider's kind is read from its shape (behaviour.md §10.2), never from a base class:

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

Session ids starting with ``convostore:`` (:data:`RESERVED_PREFIX`) are reserved for this module:
they never appear in ``Sessions.list_sessions()``, the directory or cross-session search, and a
block's text and cached prompt are deleted with the conversation they serve.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, Union, runtime_checkable

from ._ops import Call, Gen, arun, run

T = TypeVar("T")
MaybeAwaitable = Union[T, Awaitable[T]]  # noqa: UP007 (a runtime alias: `|` cannot hold a TypeVar here)
"""A provider method may return its value or an awaitable of it."""

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


# --- protocols ---------------------------------------------------------------------------------


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


# --- store-backed providers --------------------------------------------------------------------


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


# --- directory skills --------------------------------------------------------------------------

_FRONT = "---"
_FIELD_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")


def _split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(fields, body) of a document that may open with a ``---`` front-matter block."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != _FRONT:
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r") == _FRONT:
            fields: dict[str, str] = {}
            for line in lines[1:end]:
                match = _FIELD_RE.match(line.rstrip("\r"))
                if match:
                    value = match.group(2).strip()
                    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                        value = value[1:-1]
                    fields[match.group(1)] = value
            return fields, "\n".join(lines[end + 1 :])
    return {}, text


_NAME_MAX = 255
"""Most UTF-8 bytes of one file name (the common limit of ext4, APFS, NTFS and others)."""
_KEY_RULE = (
    "a key is a relative path of non-empty segments joined by '/', none starting with '.', "
    f"each at most {_NAME_MAX} bytes with the suffix, without '\\', NUL or control characters"
)


def _key_problem(key: object, suffix: str) -> str | None:
    """Why ``key`` cannot name a skill file (so it could never be read or written), or None."""
    if not isinstance(key, str) or not key:
        return "is not a non-empty string"
    if "\\" in key or any(unicodedata.category(c) == "Cc" for c in key):
        return "holds '\\' or a control character"
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate"
    segments = key.split("/")
    for i, segment in enumerate(segments):
        if not segment or segment.startswith("."):
            return "has an empty or hidden ('.'-prefixed) segment, or is absolute"
        if Path(segment).name != segment:  # a drive or root prefix where the OS reads one
            return "has a segment the file system reads as a path"
        name = segment + suffix if i == len(segments) - 1 else segment
        if len(name.encode("utf-8")) > _NAME_MAX:
            return "is too long"
    return None


class DirectorySkillProvider:
    """Skills as files in a directory: ``<path>/<key>.md``, loaded on demand.

    :param path: the directory (created by the first :meth:`set` if missing).
    :param keys: an allow-list of keys; ``None`` or empty exposes every file. A key outside it is
        not listed and loads as None without its file being read. :meth:`set` ignores it.
    :param suffix: the file name ending of a skill (``.md``).

    A key is the file's path relative to ``path`` without the suffix, with ``/`` between
    directories (``tools/git`` is ``tools/git.md``). A skill's description is the
    ``description:`` field of an optional front-matter block that opens the file::

        ---
        description: Talk like a pirate
        ---
        Arr! Always answer like a pirate.

    :meth:`load` returns the text after the front matter. The listing (:meth:`get`) has one
    line per skill, ``- key: description`` or ``- key``, sorted by key; it reads every exposed
    file. The methods are plain (blocking) file reads, also under :class:`AsyncContext`.

    Keys come from the model, so only files inside ``path`` are ever read or written: a key that
    could not name such a file (``../x``, ``/etc/x``, a hidden ``.x`` segment, NUL or another
    control character, a segment longer than 255 bytes) loads as None ("not found") and is
    refused by :meth:`set`; a file that resolves outside ``path`` (a symlink out of it) is
    neither listed nor loaded. Errors name the key, never the directory's path, since tool
    replies show them to the model.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        keys: Iterable[str] | None = None,
        *,
        suffix: str = ".md",
    ) -> None:
        if isinstance(keys, str):
            raise TypeError("keys must be a list of keys, not a string")
        if not isinstance(suffix, str) or not suffix:
            raise TypeError("suffix must be a non-empty string")
        if any(c in suffix for c in "/\\\x00"):
            raise ValueError(f"suffix {suffix!r} must not hold '/', '\\' or NUL")
        self.path = Path(path)
        """The directory holding the skill files."""
        self.keys: frozenset[str] | None = frozenset(keys) if keys else None
        """The allow-list, or None when every file is exposed."""
        self.suffix = suffix
        """The file name ending of a skill."""

    def __repr__(self) -> str:
        return f"<DirectorySkillProvider {str(self.path)!r}>"

    def _allowed(self, key: str) -> bool:
        return self.keys is None or (isinstance(key, str) and key in self.keys)

    def _file(self, key: str) -> Path | None:
        """The file of ``key``, or None for a key that could not name a file inside the path."""
        if _key_problem(key, self.suffix) is not None:
            return None
        segments = key.split("/")
        return self.path.joinpath(*segments[:-1], segments[-1] + self.suffix)

    def _inside(self, file: Path) -> bool:
        """Whether ``file``, symlinks followed, stays inside the directory."""
        try:
            return file.resolve().is_relative_to(self.path.resolve())
        except (OSError, RuntimeError):  # a symlink loop
            return False

    def _existing(self, key: str) -> Path | None:
        """The readable file of ``key`` inside the directory, or None ("not found")."""
        file = self._file(key)
        try:
            if file is None or not file.is_file():
                return None
        except OSError:  # e.g. a path longer than the OS allows: no such skill
            return None
        return file if self._inside(file) else None

    def _read(self, file: Path) -> str:
        return file.read_text(encoding="utf-8")

    def _text(self, key: str, file: Path) -> str:
        """The file's text; a failure names the key, not the server's path."""
        try:
            return self._read(file)
        except OSError as exc:
            raise OSError(exc.errno, f"skill {key!r} cannot be read: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"skill {key!r} is not UTF-8 text") from exc

    def _listed_keys(self) -> list[str]:
        if not self.path.is_dir():
            return []
        found = []
        for file in self.path.rglob("*" + self.suffix):
            key = file.relative_to(self.path).as_posix()[: -len(self.suffix)]
            if self._allowed(key) and self._existing(key) is not None:
                found.append(key)
        return sorted(found)

    def get(self) -> str | None:
        """The listing of the exposed skills, or None when there are none."""
        lines = []
        for key in self._listed_keys():
            file = self._existing(key)
            if file is None:  # removed since it was listed
                continue
            fields, _body = _split_front_matter(self._text(key, file))
            description = fields.get("description")
            lines.append(f"- {key}: {description}" if description else f"- {key}")
        return "\n".join(lines) if lines else None

    def load(self, key: str) -> str | None:
        """The skill's text without its front matter; None if absent or not allowed."""
        if not self._allowed(key):
            return None
        file = self._existing(key)
        if file is None:
            return None
        _fields, body = _split_front_matter(self._text(key, file))
        return body

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Write the skill ``key`` (atomically), with ``description`` in its front matter.

        :raises ValueError: for a key that could not name a file inside the directory (see the
            class docstring), or whose directory resolves outside it.
        :raises OSError: when the file system refuses the write; the message names the key.
        """
        if not isinstance(content, str):
            raise TypeError(f"content must be a string, not {type(content).__name__}")
        if not isinstance(key, str):
            raise TypeError(f"a skill key must be a string, not {type(key).__name__}")
        problem = _key_problem(key, self.suffix)
        if problem is not None:
            raise ValueError(f"invalid skill key {key!r}: it {problem} ({_KEY_RULE})")
        file = self._file(key)
        assert file is not None
        if not self._inside(file.parent):
            raise ValueError(f"invalid skill key {key!r}: its directory is outside the skills")
        if description:
            one_line = " ".join(str(description).split())
            text = f"{_FRONT}\ndescription: {one_line}\n{_FRONT}\n{content}"
        elif content.split("\n", 1)[0].rstrip("\r") == _FRONT:
            # Content that itself opens like front matter gets an empty block, so it reads back.
            text = f"{_FRONT}\n{_FRONT}\n{content}"
        else:
            text = content
        try:
            self._write(file, text)
        except OSError as exc:
            raise OSError(exc.errno, f"skill {key!r} cannot be written: {exc.strerror}") from exc

    def _write(self, file: Path, text: str) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-", suffix=self.suffix)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.replace(tmp, file)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
