"""The viewer's Starlette application: routes, security headers, live updates.

Every route only reads (GET); the store calls are in :mod:`convostore.web._data`, what values
look like in :mod:`convostore.web._render`, the markup in ``templates/`` and the few lines of
JavaScript in ``static/viewer.js`` (no inline script: the pages' Content-Security-Policy allows
scripts, styles, images and connections from the viewer's own origin only).

Live updates are server-sent events (``/session/events``) driven by the store's change feed:
the conversation page takes the change log's cursor before it reads the messages, and its
stream waits on :meth:`Sessions.watch` from that cursor for the session's changes (another
process's writes included), then sends the messages newer than the last one the page shows
(:func:`convostore.web._data.newer`), rendered. The watch blocks, so it runs on a worker thread
of a pool of its own (:data:`LIVE_THREADS`; page requests keep the default pool), a wait of at
most ``live_interval`` seconds at a time: between two waits the stream notices that its client
left or the server is stopping. Nothing is read while a session is quiet.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..compaction import COMPACTION_PREFIX
from ..errors import InvalidArgument, InvalidArgumentType
from ..store import Sessions
from . import _data, _render

__all__ = ["LIVE_THREADS", "LOOPBACK_HOSTS", "PAGE_CSP", "create_app"]

HERE = Path(__file__).resolve().parent

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""Host headers a viewer bound to loopback answers (others are refused: DNS rebinding)."""

PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
"""The Content-Security-Policy of every page: nothing inline, nothing from elsewhere."""

DOWNLOAD_CSP = "default-src 'none'; sandbox"
"""The policy of a served file: should a browser render it anyway, it runs nothing."""

LIVE_THREADS = 32
"""Worker threads the live streams share to wait on the change feed (each wait lasts at most
``live_interval``; more open streams take turns)."""

KEEP_ALIVE = 15.0
"""Seconds of quiet after which a live stream sends a comment (proxies close silent ones)."""

IMAGE_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"

_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*\Z")
_FILENAME_SAFE = re.compile(r"[^A-Za-z0-9._ -]")

_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", PAGE_CSP),
)


class _SecurityHeaders:
    """Adds :data:`_HEADERS` to every response that has not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(html: str) -> str:
    """``html`` with each lone surrogate (stored text may hold them; UTF-8 cannot) written as
    its visible ``\\uXXXX`` escape."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", html)


def url(path: str, **params: object) -> str:
    """``path`` with the query string of the params that are not None (a list's items each
    as the parameter)."""
    query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None},
                                   doseq=True)  # a list: the parameter repeated
    return f"{path}?{query}" if query else path


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(url=url, view_parts=_render.view_parts, anchor=_render.anchor,
                       safe_href=_render.safe_href, role_class=_render.role_class,
                       prefix=COMPACTION_PREFIX)
    env.filters.update(size=_render.size, when=_render.when, iso=_render.iso,
                       pretty=_render.pretty_json, highlight=_render.highlight)
    return env


def _param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return value if value else None


def _number(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name, "")
    return int(value) if value.isdigit() and len(value) < 10 else default


def _sid(request: Request) -> str:
    return request.query_params.get("id", "")


def _content_disposition(kind: str, filename: str | None) -> str:
    """``attachment`` or ``inline``, with the name quoted twice: ASCII-safe and RFC 5987."""
    if not filename:
        return kind
    plain = _FILENAME_SAFE.sub("_", filename)[:120] or "file"
    encoded = urllib.parse.quote(filename[:200], safe="", errors="replace")
    return f"{kind}; filename=\"{plain}\"; filename*=UTF-8''{encoded}"


def _sse(event: str, data: Mapping[str, Any], event_id: object = None) -> str:
    """One server-sent event; the data is one line of JSON, the id ASCII JSON (no newline)."""
    head = f"id: {json.dumps(event_id)}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n"


def _last_event_id(request: Request) -> tuple[str | None, int | None]:
    """Where a live stream resumes: the last message id the page has and the change cursor
    after which to wait. A reconnect's Last-Event-ID (``[cursor, "message id"]`` in JSON)
    wins over the ``after`` and ``since`` parameters of the first connection."""
    after, since = _param(request, "after"), _param(request, "since")
    cursor = int(since) if since is not None and since.isdigit() and len(since) < 19 else None
    header = request.headers.get("last-event-id")
    if header:
        try:
            value = json.loads(header)
        except ValueError:
            value = None
        if (isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)
                and isinstance(value[0], int) and not isinstance(value[0], bool)
                and value[0] >= 0):
            return value[1], value[0]
    return after, cursor


def create_app(
    store: Sessions | str | os.PathLike[str],
    *,
    allowed_hosts: Sequence[str] | None = LOOPBACK_HOSTS,
    page_size: int = 30,
    live_interval: float = 1.0,
) -> Starlette:
    """The viewer as an ASGI application (run it with uvicorn: ``convostore serve`` does).

    :param store: an open store (left open), or a URL the application opens at startup and
        closes at shutdown.
    :param allowed_hosts: the ``Host`` headers answered; the default serves loopback names
        only. ``None`` answers any host (the viewer has no login: only for a trusted network).
    :param page_size: messages per page of a conversation (older ones load on demand).
    :param live_interval: the longest a live stream waits on the change feed at a time, so
        the longest it takes to notice that its client left or the server is stopping (new
        messages are sent as soon as they commit, whatever this is).

    ``app.state.stopping`` is a :class:`threading.Event`: set it when the server is about to
    stop, and the live streams end within ``live_interval`` (a server waits for open responses
    before it stops; ``convostore serve`` sets it on Ctrl-C).
    """
    env = _environment()
    stopping = threading.Event()
    owned = not isinstance(store, Sessions)
    holder: list[Sessions] = [store] if isinstance(store, Sessions) else []
    limiters: list[anyio.CapacityLimiter] = []  # made on the event loop (startup, or first use)

    def the_store() -> Sessions:
        return holder[0]

    def render(template: str, **context: Any) -> str:
        return _encodable(env.get_template(template).render(**context))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        limiters[:] = [anyio.CapacityLimiter(LIVE_THREADS)]  # of this run's event loop
        if owned:
            assert not isinstance(store, Sessions)
            holder.append(await run_in_threadpool(Sessions.open, store))
        try:
            yield
        finally:
            if owned and holder:
                holder.pop().close()

    def sessions_page(request: Request) -> Response:
        query = request.query_params.get("q", "")
        owner = _param(request, "owner")
        pairs = [p for p in request.query_params.getlist("meta") if p.strip()]
        cursor = _param(request, "cursor")
        directory = _data.directory(the_store(), owner=owner,
                                    metadata=_data.metadata_filter(pairs), cursor=cursor,
                                    per_page=50)
        hits = _data.search(the_store(), query, 50) if query.strip() else []
        filters = {"owner": owner, "meta": pairs or None}
        return HTMLResponse(render(
            "sessions.html", directory=directory, query=query, hits=hits, owner=owner or "",
            meta=pairs, filtered=bool(owner or pairs), first_page=cursor is None,
            newest=url("/", **filters),
            older=(None if directory.next_cursor is None else
                   url("/", **filters, cursor=directory.next_cursor))))

    def conversation(request: Request) -> Response:
        sid, leaf = _sid(request), _param(request, "leaf_id")
        session = the_store().session(sid)
        since = _data.start_cursor(the_store()) if leaf is None else None
        page = _data.older_page(session, leaf_id=leaf, before=None, limit=page_size)
        if not page.entries:
            raise HTTPException(404, "no messages in this session" if leaf is None else
                                "no such message in this session")
        tokens, exact = _data.path_tokens(session, leaf)
        return HTMLResponse(render(
            "conversation.html", sid=sid, leaf_id=leaf, page=page, tokens=tokens,
            tokens_exact=exact, since=since))

    def older(request: Request) -> Response:
        sid, leaf = _sid(request), _param(request, "leaf_id")
        before = _param(request, "before")
        page = _data.older_page(the_store().session(sid), leaf_id=leaf, before=before,
                                limit=page_size)
        more = (url("/session/older", id=sid, leaf_id=leaf, before=page.oldest_id)
                if page.has_older else None)
        return JSONResponse({"html": render("_entries.html", sid=sid, entries=page.entries),
                             "older": more})

    def branch(request: Request) -> Response:
        sid, message = _sid(request), _param(request, "message")
        if message is None:
            raise HTTPException(400, "which message? (the message parameter)")
        leaf = _data.branch_leaf(the_store().session(sid), message)
        target = url("/session", id=sid, leaf_id=leaf) + _render.anchor(message)
        return RedirectResponse(target, status_code=303)

    def originals(request: Request) -> Response:
        sid, summary = _sid(request), _param(request, "compaction") or ""
        offset = _number(request, "offset", 0)
        found = _data.originals(the_store().session(sid), summary, offset, page_size)
        if found is None:
            raise HTTPException(404, "no such compaction in this session")
        shown, total = found
        end = offset + len(shown)
        more = (url("/session/originals", id=sid, compaction=summary, offset=end)
                if end < total else None)
        html = render("_originals.html", sid=sid, entries=shown, total=total, offset=offset)
        return JSONResponse({"html": html, "more": more, "total": total})

    def attachment(request: Request) -> Response:
        sid, message = _sid(request), _param(request, "message") or ""
        payload = _data.attachment(the_store().session(sid), message,
                                   _number(request, "part", -1))
        if payload is None:
            raise HTTPException(404, "no file in that part")
        media_type = payload.media_type if _MEDIA_TYPE.match(payload.media_type) else (
            "application/octet-stream")
        inline = _render.is_inline_image(media_type)
        headers = {
            "Content-Disposition": _content_disposition("inline" if inline else "attachment",
                                                        payload.filename),
            "Content-Security-Policy": IMAGE_CSP if inline else DOWNLOAD_CSP,
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        }
        return Response(payload.data, media_type=media_type, headers=headers)

    async def events(request: Request) -> Response:
        sid = _sid(request)
        session = the_store().session(sid)
        after, since = _last_event_id(request)
        if since is None:  # no cursor: follow from now (what the page shows may lag a little)
            since = await run_in_threadpool(_data.start_cursor, the_store())
        return StreamingResponse(_live(request, session, after, since),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def _live(
        request: Request, session: Any, after: str | None, since: int
    ) -> AsyncIterator[str]:
        """Wait on the change feed after ``since``; on each of the session's changes send the
        messages newer than ``after`` rendered, or ``reset`` when the page cannot follow."""
        if not limiters:
            limiters.append(anyio.CapacityLimiter(LIVE_THREADS))
        yield f"retry: {max(500, int(live_interval * 2000))}\n\n"
        quiet, catch_up = 0.0, True  # first, what came before the stream opened
        while not stopping.is_set() and not await request.is_disconnected():
            if not catch_up:
                wake = await anyio.to_thread.run_sync(
                    _data.wait_for_changes, the_store(), session.session_id, since,
                    live_interval, limiter=limiters[0])
                if wake.closed:
                    return
                if wake.expired:
                    yield _sse("reset", {"reason": "the change log moved past this page"})
                    return
                if not wake.changes:
                    quiet += live_interval
                    if quiet >= KEEP_ALIVE:
                        yield ": keep-alive\n\n"
                        quiet = 0.0
                    continue
                quiet, since = 0.0, wake.cursor
                if any(c.type in ("update", "delete", "clear") for c in wake.changes):
                    yield _sse("reset", {"reason": "messages were edited or deleted"})
                    return
            catch_up = False
            found = await run_in_threadpool(_data.newer, session, after, 200)
            if found is None:
                yield _sse("reset", {"reason": "another branch became active, or it was "
                                               "compacted"})
                return
            if found:
                after = found[-1].id
                html = await run_in_threadpool(render, "_entries.html",
                                               sid=session.session_id, entries=found)
                yield _sse("messages", {"html": html, "last": after}, [since, after])
            else:  # nothing new on the path shown: a resumed stream starts from here
                yield f"id: {json.dumps([since, after])}\n\n"

    async def bad_request(request: Request, exc: Exception) -> Response:
        return HTMLResponse(render("error.html", status=400, problem=str(exc)), 400)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return HTMLResponse(render("error.html", status=exc.status_code, problem=exc.detail),
                            exc.status_code)

    handlers: dict[Any, Callable[[Request, Exception], Any]] = {
        InvalidArgument: bad_request, InvalidArgumentType: bad_request,
        HTTPException: http_error,
    }
    middleware = [Middleware(_SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    app = Starlette(
        routes=[
            Route("/", sessions_page),
            Route("/session", conversation),
            Route("/session/older", older),
            Route("/session/branch", branch),
            Route("/session/originals", originals),
            Route("/session/events", events),
            Route("/attachment", attachment),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=middleware,
        exception_handlers=handlers,
        lifespan=lifespan,
    )
    app.state.stopping = stopping
    return app
