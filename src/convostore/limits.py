"""The limits of what the store accepts, defined once, above the engines.

Both engines must give the same answer to the same input, so what one of them cannot hold is
refused for both, before any transaction opens (nothing is written), with a ``ValueError`` or
``TypeError`` that names the argument:

- an id (message id, session id, parent id, leaf id, compaction ends, registry ids) is a string
  of at most :data:`MAX_ID_BYTES` UTF-8 bytes, without NUL and without lone surrogates: ids are
  keys of database indexes, and neither engine's text columns hold a NUL (PostgreSQL) or a lone
  surrogate (either). Text *fields* of a message are not ids: they round-trip whatever they hold;
- a short text stored in a column of its own (a role, a session's name) follows the same rules
  as an id, without the length limit;
- a timestamp (``created_at``) is epoch milliseconds from :data:`MIN_TIMESTAMP_MS` (1970) to
  :data:`MAX_TIMESTAMP_MS` (the last millisecond of year 9999, the last one a date prints);
- a count or a limit (a search ``limit``, token counters) is an ``int`` from 0 to
  :data:`MAX_COUNT`, the largest value both engines' 64-bit integers hold;
- a JSON value stored for queries to read as JSON (a session's ``metadata``) holds no NUL and no
  lone surrogate in any key or string (:func:`check_json_text`): PostgreSQL's ``jsonb`` holds
  neither, so one such row would break every query that reads the column as JSON; a value a
  query compares with it (a metadata filter) is a string, a finite float, or an integer of 64
  bits (:func:`check_json_scalar`);
- a search query's NUL and lone surrogates are word separators, as whitespace is, and as they
  are in the indexed text (:func:`search_query`).

The message fields ``id`` and ``role`` raise :class:`~convostore.InvalidMessage` (a
``ValueError``) or :class:`~convostore.InvalidMessageType` (a ``TypeError``) naming the field;
arguments raise :class:`~convostore.InvalidArgument` (a ``ValueError``) or
:class:`~convostore.InvalidArgumentType` (a ``TypeError``) naming the argument.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import InvalidArgument, InvalidArgumentType, InvalidMessage, InvalidMessageType

MAX_ID_BYTES = 1024
"""Most UTF-8 bytes of an id: two ids and a hash fit PostgreSQL's largest index entry."""
MIN_TIMESTAMP_MS = 0
"""The earliest ``created_at``: 1970-01-01T00:00:00.000Z."""
MAX_TIMESTAMP_MS = 253_402_300_799_999
"""The latest ``created_at``: 9999-12-31T23:59:59.999Z."""
MAX_COUNT = 2**63 - 1
"""The largest count or limit: what a signed 64-bit integer column or parameter holds."""
MIN_INT64 = -(2**63)
"""The smallest integer a signed 64-bit column or parameter holds."""

_UNSAFE = re.compile("[\x00\ud800-\udfff]")

Raise = Callable[[str, str], Exception]


def _text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored in a text column of either engine, or None."""
    if value.isascii() and "\x00" not in value:
        return None  # the usual id or role: no surrogate possible, one scan for NUL
    found = _UNSAFE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "must not contain a NUL character"
    return f"must not contain a lone surrogate (U+{ord(found.group()):04X})"


def check_id(
    name: str,
    value: object,
    *,
    optional: bool = False,
    empty: bool = True,
    invalid: Raise = InvalidArgument,
) -> None:
    """Refuse ``value`` unless it is a storable id (see the module docstring).

    :param name: the argument or field named by the error.
    :param optional: None is accepted.
    :param empty: ``""`` is accepted (the default session, "no parent").
    :param invalid: builds the error for a bad string (default :class:`InvalidArgument`); a
        value that is not a string raises :class:`InvalidArgumentType`.
    """
    if value is None and optional:
        return
    if not isinstance(value, str):
        kind = "a string or None" if optional else "a string"
        raise InvalidArgumentType(name, f"must be {kind}, not {type(value).__name__}")
    if not value and not empty:
        raise invalid(name, "must not be empty")
    problem = _text_problem(value)
    if problem is None and len(value) * 4 > MAX_ID_BYTES:  # at most 4 bytes a code point
        size = len(value.encode("utf-8"))
        if size > MAX_ID_BYTES:
            problem = f"must be at most {MAX_ID_BYTES} UTF-8 bytes, not {size}"
    if problem is not None:
        raise invalid(name, problem)


def check_ids(name: str, values: Sequence[object]) -> None:
    """Refuse a list of ids when one of them is not a storable id (``name[i]`` is named)."""
    for i, value in enumerate(values):
        check_id(f"{name}[{i}]", value)


def check_text(name: str, value: object, *, optional: bool = False) -> None:
    """Refuse ``value`` unless it is a string a column of either engine holds (no NUL, no lone
    surrogate, any length)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        kind = "a string or None" if optional else "a string"
        raise InvalidArgumentType(name, f"must be {kind}, not {type(value).__name__}")
    problem = _text_problem(value)
    if problem is not None:
        raise InvalidArgument(name, problem)


def check_json_text(name: str, value: object) -> None:
    """Refuse a JSON value when a key or a string anywhere in it holds a NUL or a lone
    surrogate; the error names the place (``metadata['note']``). Call it on a value
    :func:`~convostore.codec.dumps` accepted (no cycle, bounded depth)."""
    stack: list[tuple[str, Any]] = [(name, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem is not None:
                raise InvalidArgument(path, problem)
        elif isinstance(item, Mapping):
            children: list[tuple[str, Any]] = []
            for key, child in item.items():
                problem = _text_problem(key) if isinstance(key, str) else None
                if problem is not None:
                    raise InvalidArgument(path, f"key {key!r} {problem}")
                children.append((f"{path}[{key!r}]", child))
            stack += reversed(children)  # the first problem in the value's order is named
        elif isinstance(item, (list, tuple)):
            stack += reversed([(f"{path}[{i}]", child) for i, child in enumerate(item)])


def check_json_scalar(name: str, value: object) -> None:
    """Refuse a JSON scalar a query compares stored JSON with (a metadata filter's value)
    unless both engines can take it as a parameter: None, a bool, a string without NUL or
    lone surrogate, a finite float, an integer from :data:`MIN_INT64` to :data:`MAX_COUNT`."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        problem = _text_problem(value)
        if problem is not None:
            raise InvalidArgument(name, problem)
    elif isinstance(value, int):
        if not MIN_INT64 <= value <= MAX_COUNT:
            raise InvalidArgument(name, f"must be an integer from {MIN_INT64} to {MAX_COUNT}")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(name, f"must be finite, not {value!r}")
    else:
        raise InvalidArgumentType(
            name, f"must be a string, number, bool or None, not {type(value).__name__}")


def check_message_keys(message_id: object, role: object) -> None:
    """The checks of a message's ``id`` and ``role``, as :class:`~convostore.InvalidMessage`
    or :class:`~convostore.InvalidMessageType` naming the field."""
    if not isinstance(message_id, str):
        raise InvalidMessageType("id", f"expected a string, got {type(message_id).__name__}")
    check_id("id", message_id, empty=False, invalid=InvalidMessage)
    if not isinstance(role, str):
        raise InvalidMessageType("role", f"expected a string, got {type(role).__name__}")
    problem = _text_problem(role)
    if problem is not None:
        raise InvalidMessage("role", problem)


def check_timestamp(name: str, value: object) -> int:
    """``value`` (epoch milliseconds, an int or a finite float) as an int, or an error naming
    ``name`` when it is not a number or lies outside year 1970 to 9999."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentType(name, f"must be epoch milliseconds (a number), not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(name, f"must be a finite number, not {value!r}")
    if not MIN_TIMESTAMP_MS <= value <= MAX_TIMESTAMP_MS:
        raise InvalidArgument(
            name, f"must be epoch milliseconds from {MIN_TIMESTAMP_MS} to {MAX_TIMESTAMP_MS} "
            f"(years 1970 to 9999), not {value!r}"
        )
    return int(value)


def check_count(name: str, value: object, *, negative: bool = False) -> int:
    """``value`` when it is an int from 0 (``-MAX_COUNT`` with ``negative``) to
    :data:`MAX_COUNT`; an error naming ``name`` otherwise.

    A limit passes ``negative=True``: a limit of 0 or less asks for nothing, as before.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentType(name, f"must be an int, not {type(value).__name__}")
    low = -MAX_COUNT if negative else 0
    if value > MAX_COUNT:
        raise InvalidArgument(name, f"must be at most {MAX_COUNT}, not {value}")
    if value < low:
        raise InvalidArgument(name, f"must be at least {low}, not {value}")
    return value


def search_query(name: str, value: object) -> str:
    """A search query as the engines receive it: NUL and lone surrogates are word separators
    (as in the indexed text), so ``"deploy\\x00lock"`` searches for ``deploy lock``."""
    if not isinstance(value, str):
        raise InvalidArgumentType(name, f"must be a string, not {type(value).__name__}")
    return unsafe_to_spaces(value)


def unsafe_to_spaces(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by a space: what the search index
    holds of a message's text (no engine's index can hold them), and how a query reads them."""
    return _UNSAFE.sub(" ", text) if _UNSAFE.search(text) else text
