"""``convostore serve``: the command that runs the web viewer (:mod:`convostore.web`).

Registered by :mod:`convostore.cli`, which passes its store opener (so a path holding no store
is an error and nothing is created). The viewer's stack (the ``web`` extra) is imported only
when the command runs: without it, ``MissingDependency`` names the extra to install.

The socket is bound here, before the server starts, so a port in use is an ordinary one-line
error, and ``--port 0`` picks a free port (the address printed is the one bound).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from collections.abc import Callable
from typing import Any

from ..backends._engines import display_url
from ..errors import MissingDependency
from ..store import Sessions
from ._text import Output

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "SERVE_DESCRIPTION", "SERVE_SUMMARY", "add_arguments",
           "bind", "is_loopback", "run"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

SERVE_SUMMARY = "browse the conversations in a local web viewer (read-only)"
SERVE_DESCRIPTION = (
    "Serve a read-only web viewer of the database: the sessions, a search across\n"
    "them, and each conversation as a chat with its branches, compaction summaries\n"
    "(originals expandable), tool calls, reasoning and attachments; new messages\n"
    "written by other processes appear live. Listens on 127.0.0.1 (this machine\n"
    "only) unless --host says otherwise. Needs: pip install 'convostore[web]'."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``serve`` (``DB`` comes from the shared parent parser)."""
    parser.add_argument("--host", metavar="HOST", default=DEFAULT_HOST,
                        help=f"address to listen on (default: {DEFAULT_HOST}, this machine "
                             "only; another address lets others read every conversation)")
    parser.add_argument("--port", metavar="PORT", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default: {DEFAULT_PORT}; 0 picks a free one)")


def is_loopback(host: str) -> bool:
    """Does ``host`` name this machine only (``127.0.0.0/8``, ``::1``, ``localhost``)?"""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (the first address ``host`` resolves to)."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def _stack() -> tuple[Any, Any]:
    """(``convostore.web.create_app``, ``uvicorn``), or MissingDependency naming the extra."""
    try:
        import uvicorn

        from ..web import create_app
    except ImportError as exc:
        raise MissingDependency(
            f"the web viewer needs {exc.name or 'its dependencies'}: "
            "pip install 'convostore[web]'"
        ) from exc
    return create_app, uvicorn


def run(args: argparse.Namespace, out: Output, opener: Callable[[str], Sessions]) -> None:
    """Run the viewer until interrupted (Ctrl-C); the store is closed on the way out."""
    create_app, uvicorn = _stack()
    loopback = is_loopback(args.host)
    with opener(args.db) as store:
        sock = bind(args.host, args.port)
        port = sock.getsockname()[1]
        shown = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
        out.line(f"convostore serve: {display_url(args.db)} at http://{shown}:{port}/ "
                 "(read-only; Ctrl-C stops it)")
        if loopback:
            out.line("listening on the loopback address: only this machine can connect")
        else:
            print(f"convostore serve: warning: listening on {args.host}: anyone who can reach "
                  f"this machine on port {port} can read every conversation (the viewer has "
                  "no login)", file=sys.stderr)
        out.stream.flush()
        app = create_app(store, allowed_hosts=None if not loopback else
                         ("127.0.0.1", "localhost", "::1", "[::1]", args.host))
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5,
                                lifespan="on")
        server = uvicorn.Server(config)
        stop = server.handle_exit

        def handle_exit(sig: int, frame: Any) -> None:
            app.state.stopping.set()  # live streams end, so the server need not wait for them
            stop(sig, frame)

        server.handle_exit = handle_exit
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
