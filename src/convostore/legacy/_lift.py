"""Lifting databases written by the reference system, once per open.

:func:`lift` runs when a store opens. One catalog query decides whether there is anything to do;
on a database without legacy tables that is all it costs.

v0.17 sessions (``assistant_messages``, ``assistant_compactions``), in one store-wide
transaction:

1. each source is copied with one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` (rows never
   pass through Python): content verbatim in one row, ``seq`` by ``created_at`` then insertion
   order within each session, timestamps as epoch milliseconds, ``token_estimate`` = UTF-8
   bytes // 4; compaction records keep their ids, so a stored echo ``compaction_<id>`` of one
   is hidden by reads as for any other session (#1984);
2. verification: every source row must have a destination row with the same session, id and
   identical content (summary for compactions); a verified source is dropped, otherwise it is
   kept and a warning names the table and how many of its rows copied (``source``, ``copied``,
   also set as attributes of the log record);
3. the old registry (``assistant_sessions``) and index (``assistant_fts``) are dropped;
   ``assistant_config`` is left alone. A search index already built is brought up to date.

AIChatAgent's ``cf_ai_chat_agent_messages``: an ordering pass reads (id, size, created_at)
only; bodies are read in windows of at most 25 rows and 4 MiB; each body is converted from the
AI SDK v4 format when needed (:func:`to_v5`) and imported into the default session as one linear
chain. An invalid row is skipped with a warning; the table is dropped only when every row was
imported (ids already present count), so a partial lift is retried by the next open.

Everything is idempotent. A lift that fails with an error is logged and retried by the next
open; the store opens regardless.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .. import codec
from ..backends.base import Backend
from ..errors import ConvostoreError
from ..limits import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS
from ..messages._windows import pack
from ..model import Message
from ..search._index import restart_backfill
from ._sql import (
    CHAT_MESSAGES,
    LEGACY_COMPACTIONS,
    LEGACY_FTS,
    LEGACY_MESSAGES,
    LEGACY_REGISTRY,
)

if TYPE_CHECKING:
    from .._core import StoreCore
    from ..session import Session

logger = logging.getLogger("convostore")

CHAT_WINDOW_ROWS = 25
"""Most chat rows whose bodies one query reads."""
CHAT_WINDOW_BYTES = 4 * 1024 * 1024
"""Most stored bytes of chat bodies one query reads (a larger row forms a window alone)."""

_TRIGGERS = (LEGACY_MESSAGES, LEGACY_COMPACTIONS, CHAT_MESSAGES)


def lift(core: StoreCore, session: Callable[[str], Session]) -> None:
    """Lift every legacy table found in the store's database; called once per open.

    :param session: the store's handle factory (the chat transcript is imported through the
        default session's ``import_message``).
    """
    backend = core.backend
    try:
        with backend.read() as ops:
            present = ops.existing_tables(_TRIGGERS)
        if not present:
            return
        if LEGACY_MESSAGES in present or LEGACY_COMPACTIONS in present:
            _lift_sessions(backend)
        if CHAT_MESSAGES in present:
            _lift_chat(backend, session(""))
    except Exception:
        logger.exception("lifting the legacy tables of %s failed; retried on the next open",
                         backend.url)


# --- v0.17 sessions ----------------------------------------------------------------------------


def _lift_sessions(backend: Backend) -> None:
    with backend.write(None) as ops:
        sql = ops.legacy
        # Again inside the transaction: another process may have lifted them meanwhile.
        present = ops.existing_tables(
            [LEGACY_MESSAGES, LEGACY_COMPACTIONS, LEGACY_REGISTRY, LEGACY_FTS]
        )
        lifted_messages = False
        for table in (LEGACY_MESSAGES, LEGACY_COMPACTIONS):
            if table not in present:
                continue
            if table == LEGACY_MESSAGES:
                sql.copy_messages(ops)
            else:
                sql.copy_compactions(ops)
            sql.bump_epochs(ops, table)
            source, copied = sql.verify(ops, table)
            if table == LEGACY_MESSAGES:
                lifted_messages = source > 0
            if copied == source:
                sql.drop(ops, table)
                logger.info("lifted %d rows of %s and dropped it", source, table)
            else:
                logger.warning(
                    "legacy table %s kept: %d of its %d rows copied faithfully (a row with the "
                    "same id but other content was already there); retried on the next open",
                    table, copied, source,
                    extra={"table": table, "source": source, "copied": copied},
                )
        for table in (LEGACY_REGISTRY, LEGACY_FTS):
            if table in present:
                sql.drop(ops, table)
        ops.dir_recount()  # the rows were copied in bulk: the directory counts them now
        if lifted_messages and ops.fts_exists():
            # an index built before this lift must learn the lifted rows: not here, under
            # the store lock, but by the stepped build of the next search or build_search_index
            restart_backfill(ops)


# --- AIChatAgent's transcript ------------------------------------------------------------------


def windows(
    rows: Sequence[tuple[str, int, Any]],
    max_rows: int = CHAT_WINDOW_ROWS,
    max_bytes: int = CHAT_WINDOW_BYTES,
) -> Iterator[list[tuple[str, int, Any]]]:
    """Consecutive windows of ``(id, bytes, created_at)`` rows: at most ``max_rows`` rows and
    ``max_bytes`` bytes each, never empty (a row larger than the limit goes alone)."""
    return pack(rows, lambda row: row[1], max_rows, max_bytes)


def _lift_chat(backend: Backend, session: Session) -> None:
    with backend.read() as ops:
        sql = ops.legacy
        order = sql.chat_order(ops)
    imported = skipped = 0
    parent: str | None = None
    last_ms: int | None = None
    for window in windows(order):
        with backend.read() as ops:
            bodies = sql.chat_bodies(ops, [row[0] for row in window])
        for row_id, _size, created in window:
            body = bodies.get(row_id)
            message = _chat_message(body, row_id)
            if message is None:
                skipped += 1
                continue
            created_ms = _created_ms(created)
            if created_ms is None:  # neither a number nor a date: keep the chain in order
                created_ms = 0 if last_ms is None else last_ms + 1
            try:
                session.import_message(message, parent_id=parent, created_at=created_ms)
            except (ConvostoreError, TypeError, ValueError) as exc:
                logger.warning("skipping %s row %r: %s", CHAT_MESSAGES, row_id, exc)
                skipped += 1
                continue
            imported += 1
            parent = message["id"]
            last_ms = created_ms
    if skipped == 0 and imported == len(order):
        with backend.write(None) as ops:
            ops.legacy.drop(ops, CHAT_MESSAGES)
        logger.info("lifted %d rows of %s and dropped it", imported, CHAT_MESSAGES)
    else:
        logger.warning(
            "legacy table %s kept: imported %d of %d rows (%d skipped); retried on the next open",
            CHAT_MESSAGES, imported, len(order), skipped,
            extra={"table": CHAT_MESSAGES, "source": len(order), "copied": imported},
        )


def _chat_message(body: str | None, row_id: str) -> Message | None:
    """The message a chat row holds, in the v5 format; None (and a warning) when invalid."""
    if body is None:
        logger.warning("skipping %s row %r: it disappeared during the lift", CHAT_MESSAGES,
                       row_id)
        return None
    try:
        value = codec.loads(body)
    except ValueError as exc:
        logger.warning("skipping %s row %r: not JSON (%s)", CHAT_MESSAGES, row_id, exc)
        return None
    message = to_v5(value, row_id)
    if message is None:
        logger.warning("skipping %s row %r: not a message (needs an id, a role and parts)",
                       CHAT_MESSAGES, row_id)
    return message


def _created_ms(value: Any) -> int | None:
    """A chat row's ``created_at`` as epoch milliseconds the store accepts, else None (the
    caller then keeps the row in order after the one before it)."""
    try:
        ms = _as_ms(value)
    except (OverflowError, ValueError):  # an infinite or NaN number
        return None
    return ms if ms is not None and MIN_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS else None


def _as_ms(value: Any) -> int | None:
    """A number as is, else a parsed date (read as UTC when it names no zone), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            return int(float(text))
        except ValueError:
            pass
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


# --- AI SDK v4 → v5 ----------------------------------------------------------------------------

_TOOL_STATES = {
    "partial-call": "input-streaming",
    "call": "input-available",
    "result": "output-available",
    "error": "output-error",
}


def is_v4(message: dict[str, Any]) -> bool:
    """True when ``message`` is in the AI SDK v4 format: no ``parts`` list, or v4-only parts
    (``tool-invocation``, ``source``, reasoning under ``reasoning``, files as ``data``)."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return True
    return any(isinstance(p, dict) and _is_v4_part(p) for p in parts)


def _is_v4_part(part: dict[str, Any]) -> bool:
    kind = part.get("type")
    if kind in ("tool-invocation", "source"):
        return True
    if kind == "reasoning":
        return "text" not in part and isinstance(part.get("reasoning"), str)
    if kind == "file":
        return "url" not in part and ("data" in part or "mimeType" in part)
    return False


def to_v5(value: Any, fallback_id: str | None = None) -> Message | None:
    """A stored chat message as an AI SDK v5 UIMessage; None when it cannot be one.

    A v5 message (a ``parts`` list with no v4-only part) is returned unchanged. A v4 message
    becomes ``{id, role, parts[, metadata]}``: its v4 ``parts`` converted one by one when it has
    them (they are complete), otherwise parts built from ``reasoning``, ``toolInvocations``, the
    ``content`` text and ``experimental_attachments``. Role ``data`` becomes ``system``; v4's
    ``createdAt``, ``annotations`` and ``data`` move into ``metadata``. A missing id is taken
    from ``fallback_id`` (the row's key).

    :param value: the parsed JSON of the row.
    :param fallback_id: the id to use when the message has none.
    """
    if not isinstance(value, dict):
        return None
    message: dict[str, Any] = value
    if not is_v4(message):
        converted = message
    else:
        role = message.get("role")
        converted = {
            "id": message.get("id"),
            "role": "system" if role == "data" else role,
            "parts": _v4_parts(message),
        }
        extra = {k: message[k] for k in ("createdAt", "annotations", "data") if k in message}
        metadata = message.get("metadata")
        if isinstance(metadata, dict) or extra:
            converted["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), **extra}
    if converted.get("id") is None and fallback_id:
        converted = {"id": fallback_id, **{k: v for k, v in converted.items() if k != "id"}}
    if not codec.is_valid_stored(converted) or not converted["id"]:
        return None
    return converted


def _v4_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    if isinstance(parts, list) and parts:
        return [_v4_part(p) if isinstance(p, dict) else p for p in parts]
    out: list[dict[str, Any]] = []
    reasoning = message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        out.append({"type": "reasoning", "text": reasoning})
    invocations = message.get("toolInvocations")
    if isinstance(invocations, list):
        out.extend(_tool_part(inv) for inv in invocations if isinstance(inv, dict))
    content = message.get("content")
    if isinstance(content, str):
        if content or not out:
            out.append({"type": "text", "text": content})
    elif isinstance(content, list):  # content given as parts by mistake
        for item in content:
            if isinstance(item, dict) and "text" in item:
                out.append({"type": item.get("type") or "text", "text": item.get("text") or ""})
    elif content is not None and not out:
        out.append({"type": "text", "text": json.dumps(content, ensure_ascii=False)})
    attachments = message.get("experimental_attachments")
    if isinstance(attachments, list):
        for att in attachments:
            if isinstance(att, dict) and isinstance(att.get("url"), str):
                part: dict[str, Any] = {
                    "type": "file",
                    "mediaType": att.get("contentType") or "application/octet-stream",
                }
                if att.get("name"):
                    part["filename"] = att["name"]
                part["url"] = att["url"]
                out.append(part)
    return out


def _v4_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
        return _tool_part(part["toolInvocation"])
    if kind == "reasoning" and _is_v4_part(part):
        return {"type": "reasoning", "text": part["reasoning"]}
    if kind == "source" and isinstance(part.get("source"), dict):
        source = part["source"]
        out: dict[str, Any] = {"type": "source-url", "sourceId": source.get("id"),
                               "url": source.get("url")}
        if source.get("title") is not None:
            out["title"] = source["title"]
        if source.get("providerMetadata") is not None:
            out["providerMetadata"] = source["providerMetadata"]
        return out
    if kind == "file" and _is_v4_part(part):
        media = part.get("mimeType") or part.get("mediaType") or "application/octet-stream"
        out = {"type": "file", "mediaType": media}
        if part.get("filename"):
            out["filename"] = part["filename"]
        out["url"] = f"data:{media};base64,{part.get('data') or ''}"
        return out
    return part


def _tool_part(invocation: dict[str, Any]) -> dict[str, Any]:
    """A v4 tool invocation as a v5 ``tool-<name>`` part."""
    state = _TOOL_STATES.get(str(invocation.get("state")), "input-available")
    part: dict[str, Any] = {
        "type": f"tool-{invocation.get('toolName')}",
        "toolCallId": invocation.get("toolCallId"),
        "state": state,
        "input": invocation.get("args"),
    }
    if state == "output-available":
        part["output"] = invocation.get("result")
    elif state == "output-error":
        part["errorText"] = str(invocation.get("errorText") or invocation.get("result") or "")
    return part
