"""JSON nesting without the call stack: measure it, decode through it, name a deep path briefly,
and find the first value JSON cannot hold.

Python's JSON encoder and decoder spend one level of the interpreter's recursion budget per
level of nesting, so how deep a value may be depends on how deep the caller's stack already is.
The store bounds nesting when it writes (:data:`convostore.codec.MAX_JSON_DEPTH`, checked with
:func:`exceeds_depth` on the stored text), and decodes with :func:`loads_iterative` when the
fast decoder runs out of stack, so what was stored reads back from any call depth.
"""

from __future__ import annotations

import json.decoder
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from json.scanner import NUMBER_RE
from typing import Any

scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

_WS_RE = re.compile(r"[ \t\n\r]*")
_CONSTANTS: dict[str, Any] = {
    "null": None, "true": True, "false": False,
    "NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf"),
}


_NOT_MARKS = bytes(c for c in range(256) if c not in b'"[]{}')
_FOLD = bytes.maketrans(b"{}", b"[]")


def exceeds_depth(text: str, limit: int) -> bool:
    """Does the JSON ``text``, as convostore's encoder writes it, nest containers more than
    ``limit`` levels deep?

    Work done in C, on a short residue: the text reduced to its quotes and brackets, ``{}``
    folded into ``[]`` (one ``translate``, cheaper than counting the brackets of the text). At
    most ``limit`` brackets, strings' included, cannot nest deeper. Otherwise, after dropping
    escaped backslashes and quotes (so the quotes left delimit strings: the text is compact and
    well formed), the strings are cut out of the residue (most hold no bracket: ``""`` pairs
    go first) and each pass removes the innermost pairs, one level per pass.
    """
    marks = text.encode("utf-8", "surrogatepass").translate(_FOLD, _NOT_MARKS)
    if marks.count(b"[") <= limit:
        return False
    if "\\" in text:  # escaped quotes would pass for string ends: drop them, measure again
        text = text.replace("\\\\", "").replace('\\"', "")
        marks = text.encode("utf-8", "surrogatepass").translate(_FOLD, _NOT_MARKS)
    # Removing adjacent quotes keeps the order of everything outside strings: a pair is an
    # empty string, or the end of one string and the start of the next with nothing between.
    marks = marks.replace(b'""', b"")
    brackets = b"".join(marks.split(b'"')[::2]) if b'"' in marks else marks
    for _ in range(limit):
        brackets = brackets.replace(b"[]", b"")
        if not brackets:
            return False
    return True


def _fail(text: str, pos: int, expected: str) -> ValueError:
    return ValueError(f"invalid JSON at character {pos}: expected {expected}")


def _key(text: str, pos: int) -> tuple[str, int]:
    """The object key starting at ``pos`` (whitespace allowed around it) and the position
    after its colon."""
    pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]  # matches the empty text
    if text[pos : pos + 1] != '"':
        raise _fail(text, pos, "a string key")
    key, pos = scanstring(text, pos + 1)
    pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] != ":":
        raise _fail(text, pos, "':'")
    return key, pos + 1


def loads_iterative(text: str) -> Any:
    """:func:`json.loads` with an explicit stack instead of recursion: any nesting depth, from
    any call depth. Slower than the C decoder; the store uses it only when that one fails with
    :class:`RecursionError`.

    :raises ValueError: the text is not JSON (or holds an integer longer than Python converts).
    """
    stack: list[tuple[Any, str]] = []  # open containers, each with the key its next value takes
    pos = 0
    while True:
        pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
        ch = text[pos : pos + 1]
        value: Any
        if ch == "{" or ch == "[":
            close = "}" if ch == "{" else "]"
            after = _WS_RE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[after : after + 1] == close:
                value, pos = ({} if ch == "{" else []), after + 1
            elif ch == "{":
                key, pos = _key(text, pos + 1)
                stack.append(({}, key))
                continue
            else:
                stack.append(([], ""))
                pos += 1
                continue
        elif ch == '"':
            value, pos = scanstring(text, pos + 1)
        else:
            number = NUMBER_RE.match(text, pos)
            if number is not None:
                integer, frac, exp = number.groups()
                value = float(integer + (frac or "") + (exp or "")) if frac or exp else int(integer)
                pos = number.end()
            else:
                for word, constant in _CONSTANTS.items():
                    if text.startswith(word, pos):
                        value, pos = constant, pos + len(word)
                        break
                else:
                    raise _fail(text, pos, "a value")
        while True:  # hand the value to its container; close the containers that end here
            if not stack:
                pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
                if pos != len(text):
                    raise _fail(text, pos, "the end of the text")
                return value
            container, key = stack[-1]
            if isinstance(container, list):
                container.append(value)
            else:
                container[key] = value
            pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
            ch = text[pos : pos + 1]
            if ch == ",":
                if isinstance(container, dict):
                    key, pos = _key(text, pos + 1)
                    stack[-1] = (container, key)
                else:
                    pos += 1
                break
            if ch != ("]" if isinstance(container, list) else "}"):
                raise _fail(text, pos, "',' or the end of the container")
            stack.pop()
            value, pos = container, pos + 1


def size_iterative(value: Any, scalar_size: Callable[[Any], int]) -> int:
    """The length of the compact JSON text of ``value`` (``scalar_size`` measures each string,
    number, boolean, null and key), summed with an explicit stack: any depth, any call depth."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + max(0, 2 * len(item) - 1)  # braces, a colon per member, commas
            for key, member in item.items():
                total += scalar_size(key if isinstance(key, str) else str(key))
                stack.append(member)
        elif isinstance(item, (list, tuple)):
            total += 2 + max(0, len(item) - 1)
            stack.extend(item)
        else:
            total += scalar_size(item)
    return total


_SEGMENT_RE = re.compile(r"\[\d+\]|\.?[^.\[]+")
_HEAD_SEGMENTS = 6
_TAIL_SEGMENTS = 2
_MAX_PATH_CHARS = 120


def short_path(path: str) -> str:
    """A field path cut to something a person reads: its first and last few steps.

    ``parts[0].data[0][0][0]...[0][0]`` stands for a path hundreds of steps long; a path that
    is still too long (long keys) keeps its first and last characters.
    """
    if len(path) <= 60:
        return path
    segments = _SEGMENT_RE.findall(path)
    if len(segments) > _HEAD_SEGMENTS + _TAIL_SEGMENTS:
        path = (
            "".join(segments[:_HEAD_SEGMENTS]) + "..." + "".join(segments[-_TAIL_SEGMENTS:])
        )
    if len(path) > _MAX_PATH_CHARS:
        path = path[:80] + "..." + path[-37:]
    return path


def _leaf_problem(value: Any) -> str:
    """Why JSON cannot hold a value that is not a container, or ``""``."""
    if value is None or isinstance(value, (str, bool)):
        return ""
    if isinstance(value, int):
        try:
            str(value)
        except ValueError:  # longer than sys.get_int_max_str_digits()
            return (
                f"an integer of more than {sys.get_int_max_str_digits():,} digits cannot be "
                "written as JSON text"
            )
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{value!r} is not a JSON number"
    return f"a {type(value).__name__} value cannot be stored as JSON"


def _children(container: Any) -> Iterator[tuple[str, Any, str]]:
    """(path step, child, problem of its key) of each member of a container."""
    if isinstance(container, Mapping):
        for k, v in container.items():
            ok = k is None or isinstance(k, (str, int, float))
            yield f".{k}", v, "" if ok else f"key {k!r} is not a string"
    else:
        for i, v in enumerate(container):
            yield f"[{i}]", v, ""


def find_bad_value(value: Any, max_depth: int) -> tuple[str, str]:
    """The path and the problem of the first value JSON cannot hold, or ``("", "")``.

    Walked with an explicit stack (no recursion, so it works from any call depth); nesting
    deeper than ``max_depth`` and a container that holds itself are problems too.
    """
    if not isinstance(value, (Mapping, list, tuple)):
        problem = _leaf_problem(value)
        return ("message", problem) if problem else ("", "")
    open_ = {id(value)}
    # each open container: its members still to look at, its path, itself
    stack: list[tuple[Iterator[tuple[str, Any, str]], str, Any]] = [
        (_children(value), "", value)
    ]
    while stack:
        members, path, container = stack[-1]
        step = next(members, None)
        if step is None:
            stack.pop()
            open_.discard(id(container))
            continue
        name, child, key_problem = step
        if key_problem:
            return path or "message", key_problem
        here = path + name if path else name.removeprefix(".")
        if isinstance(child, (Mapping, list, tuple)):
            if id(child) in open_:
                return here, "a container that holds itself cannot be stored as JSON"
            if len(stack) >= max_depth:
                return here, f"nested more than {max_depth} levels deep"
            open_.add(id(child))
            stack.append((_children(child), here, child))
            continue
        problem = _leaf_problem(child)
        if problem:
            return here, problem
    return "", ""
