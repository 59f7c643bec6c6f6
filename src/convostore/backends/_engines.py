"""The engine registry: which engine a URL opens, and the questions asked of it before opening.

Each engine module declares itself as an :class:`~.base.Engine` (``ENGINE``): the URLs it
takes, the options it accepts, its worker model, its capabilities, whether a target is a local
file, its schema as data and how it opens a :class:`~.base.Backend`. :data:`ENGINES` lists them,
one line each; adding an engine is one module and one line here (``docs/engines.md``).

The store, the async API and the command line ask only this module:

- :func:`parse_url`: the engine and target of a URL or path (:class:`~convostore.errors.
  InvalidURL` when no engine takes it);
- :func:`open_backend`: a backend for ``Sessions.open``'s arguments;
- :func:`worker_count`: how many worker threads ``AsyncSessions`` gives a store;
- :func:`local_file`: the file a URL names on this machine, if any;
- :func:`has_store`: whether a URL already holds a store (read-only tools ask, to write nothing);
- :func:`display_url`: a URL as messages show it, password removed.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Literal, NamedTuple

from ..errors import ConvostoreError, InvalidURL, MissingDependency
from . import postgres, sqlite
from .base import Backend, Engine, OpenOptions

ENGINES: tuple[Engine, ...] = (
    sqlite.ENGINE,  # a file path, os.PathLike, sqlite:///path, file:path, :memory:
    postgres.ENGINE,  # postgresql://, postgres://, postgresql+psycopg://, key=value, or pool=
)
"""Every engine, in the order they are asked whether a URL is theirs (their URLs never overlap)."""


class ParsedURL(NamedTuple):
    """What a URL names: the engine that opens it, and its target for that engine."""

    engine: Engine
    target: str


def _paths_engine() -> Engine:
    return next(e for e in ENGINES if e.paths)


def _pool_engine() -> Engine:
    return next(e for e in ENGINES if "pool" in e.options)


def _forms() -> str:
    """The URL forms of every engine, as a sentence: ``a, b, c or d``."""
    forms = [form for engine in ENGINES for form in engine.forms]
    return ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else forms[0]


def parse_url(url: str | os.PathLike[str]) -> ParsedURL:
    """The engine and target of a URL or path.

    :raises InvalidURL: not a string or path, empty, or a scheme no engine takes.
    """
    if isinstance(url, os.PathLike):
        return ParsedURL(_paths_engine(), os.fspath(url))
    if not isinstance(url, str):
        raise InvalidURL(f"expected a URL or path, got {type(url).__name__}")
    for engine in ENGINES:
        target = engine.parse(url)
        if target is not None:
            return ParsedURL(engine, target)
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise InvalidURL(f"cannot open {url!r}: unknown scheme {scheme!r} (use {_forms()})")
    if not url:
        raise InvalidURL("empty database URL")
    return ParsedURL(_paths_engine(), url)


def _titles(option: str) -> str:
    return " or ".join(e.title for e in ENGINES if option in e.options)


def open_backend(
    url: str | os.PathLike[str] | None,
    *,
    pool: Any = None,
    pool_size: int = 10,
    schema: str | None = None,
    durability: Literal["normal", "full"] = "normal",
    busy_timeout: float = 30.0,
    listen_url: str | None = None,
    partitions: int | None = None,
    transaction_pooler: bool | None = None,
) -> Backend:
    """Open the backend ``Sessions.open`` asks for (see its parameters).

    ``pool`` opens the engine that takes a pool (``url`` is then not read); otherwise ``url``
    chooses the engine. An option the engine does not take is refused before anything opens.

    :raises InvalidURL: no URL and no pool, a URL no engine takes, or an option of another
        engine (``schema= applies to PostgreSQL only``).
    :raises MissingDependency: the engine's driver is not installed.
    """
    if pool is not None:
        engine, target = _pool_engine(), None
    elif url is None:
        raise InvalidURL("Sessions.open() needs a URL, a path or pool=")
    else:
        engine, target = parse_url(url)
    options = OpenOptions(pool=pool, pool_size=pool_size, schema=schema,
                          durability=durability, busy_timeout=busy_timeout,
                          listen_url=listen_url, partitions=partitions,
                          transaction_pooler=transaction_pooler)
    for name in ("pool", "schema", "listen_url", "partitions", "transaction_pooler"):
        if getattr(options, name) is not None and name not in engine.options:
            raise InvalidURL(f"{name}= applies to {_titles(name)} only")
    _require(engine)
    return engine.open(target, options)


def _require(engine: Engine) -> None:
    """Import the engine's driver; :class:`MissingDependency` naming the extra when missing."""
    try:
        for module in engine.requires:
            importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(
            f"{engine.title} support needs {engine.requires[0]}: "
            f"pip install 'convostore[{engine.extra}]'"
        ) from exc


def has_store(url: str | os.PathLike[str]) -> bool:
    """Whether ``url`` already holds a convostore store; asking creates and writes nothing
    (read-only tools ask before opening, since opening creates the schema).

    :raises InvalidURL: as :func:`parse_url`.
    :raises MissingDependency: the engine's driver is not installed.
    :raises BackendError: the database cannot be read (not a database, server unreachable).
    """
    engine, target = parse_url(url)
    _require(engine)
    return engine.has_store(target)


def display_url(url: str | os.PathLike[str]) -> str:
    """``url`` as messages show it: its engine's target with any password removed.

    :raises InvalidURL: as :func:`parse_url`.
    """
    engine, target = parse_url(url)
    return engine.redact(target)


def worker_count(url: object, *, pool: object = None, pool_size: object = 10) -> int:
    """How many worker threads ``AsyncSessions`` should run for a store opened with these
    arguments, as the engine's worker model says; 1 when the URL is invalid (opening it, on
    that worker, raises the error)."""
    if pool is not None:
        return _pool_engine().workers(pool_size)
    try:
        engine, _target = parse_url(url)  # type: ignore[arg-type]
    except ConvostoreError:
        return 1
    return engine.workers(pool_size)


def local_file(url: str | os.PathLike[str]) -> str | None:
    """The database file ``url`` names on this machine, or None (in memory, a server).

    :raises InvalidURL: as :func:`parse_url`.
    """
    engine, target = parse_url(url)
    return engine.local_file(target)
