"""One behaviour, two drivers: the context logic as generators that yield the I/O they need.

The behaviour of :class:`~convostore.context.Context` and :class:`~convostore.context.AsyncContext`
is written once, as generators in ``_core.py`` that do no I/O themselves. Each yields an op --
"call this provider or session method", or "stream this iterator through this function" -- and
receives the result. :func:`run` performs ops directly (resolving an awaitable a user callback
returned on a private event loop); :func:`arun` awaits them. This is psycopg's ``generators.py`` /
``waiting.py`` split, and it is why a provider or session method may be sync or async under
either face.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """Call ``fn(*args, **kwargs)``; the driver sends back the result (awaited if awaitable)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scan:
    """Iterate ``fn(*args, **kwargs)`` (sync or async iterator), feeding ``consume`` each item.

    ``consume`` returns True to stop early; the iterator is then closed, so a streamed read holds
    no more than its current window. The driver sends back None.
    """

    fn: Callable[..., Any]
    consume: Callable[[Any], bool]
    kwargs: dict[str, Any] = field(default_factory=dict)


Op = Call | Scan
Gen = Generator[Op, Any, T]
"""A behaviour generator: yields ops, returns a ``T``."""


def _resolve(value: Any) -> Any:
    """Sync face: the value of an awaitable a user callback returned, on a private loop."""
    if not inspect.isawaitable(value):
        return value
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(value):
            value.close()  # never awaited: close it so Python does not warn about it
        raise TypeError(
            "an async provider or session was given to the sync Context inside a running "
            "event loop; use convostore.context.AsyncContext"
        )

    async def wrap(awaitable: Awaitable[Any]) -> Any:
        return await awaitable

    return asyncio.run(wrap(value))


def _drain(iterator: Any, consume: Callable[[Any], bool]) -> None:
    """Feed a sync iterator's items to ``consume`` until it returns True; then close it."""
    try:
        for item in iterator:
            if consume(item):
                break
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _perform(op: Op) -> Any:
    """Sync face: perform one op and return what the generator is sent."""
    if isinstance(op, Call):
        return _resolve(op.fn(*op.args, **op.kwargs))
    iterator = _resolve(op.fn(**op.kwargs))
    if hasattr(iterator, "__aiter__"):
        raise TypeError(
            f"{getattr(op.fn, '__qualname__', op.fn)!s}() returned an async iterator, which the "
            "sync Context cannot stream; use convostore.context.AsyncContext"
        )
    _drain(iterator, op.consume)
    return None


async def _aperform(op: Op) -> Any:
    """Async face: perform one op, awaiting what is awaitable, and return what is sent back."""
    if isinstance(op, Call):
        value = op.fn(*op.args, **op.kwargs)
        return await value if inspect.isawaitable(value) else value
    iterator = op.fn(**op.kwargs)
    if inspect.isawaitable(iterator) and not hasattr(iterator, "__aiter__"):
        iterator = await iterator
    if hasattr(iterator, "__aiter__"):
        try:
            async for item in iterator:
                if op.consume(item):
                    break
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()
        return None
    _drain(iterator, op.consume)
    return None


def run(gen: Gen[T]) -> T:
    """Drive ``gen`` synchronously; an op's exception is thrown back into the generator."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        value, error = None, None
        try:
            value = _perform(op)
        except Exception as exc:
            error = exc


async def arun(gen: Gen[T]) -> T:
    """Drive ``gen`` on the running event loop, awaiting each op."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        value, error = None, None
        try:
            value = await _aperform(op)
        except Exception as exc:
            error = exc
