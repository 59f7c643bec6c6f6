"""A small service that streams one session's changes to a client, resumable from a cursor.

``GET /sessions/<id>/changes`` answers with Server-Sent Events: one event per change of the
durable change log (``store.watch(session_id=...)``), its ``id:`` the change's cursor and its
``data:`` the change as JSON (ids, kind, leaf: never message content; the client fetches a
message when it wants it). A browser's ``EventSource`` reconnects by itself with the
``Last-Event-ID`` header, so after a dropped connection the stream resumes after the last
change the client got: nothing is skipped. A cursor the log no longer holds answers
``410 Gone``: the client reloads the session and starts from ``store.change_cursor()``.

Writers may be other processes: on SQLite the watcher notices their commits within a few
milliseconds, on PostgreSQL through LISTEN/NOTIFY. Here a thread plays the writer, and a
client reads three changes, drops the connection, and reconnects with the last cursor.

Run it: ``python examples/feed_service.py`` (offline; stdlib only).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import urllib.request
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from convostore import CursorExpired, Sessions


def make_handler(store: Sessions) -> type[BaseHTTPRequestHandler]:
    class ChangeStream(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            parts = self.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "sessions" or parts[2] != "changes":
                self.send_error(404)
                return
            session_id = parts[1]
            last = self.headers.get("Last-Event-ID")
            since = int(last) if last else store.change_cursor()
            try:
                store.changes(since, limit=0)  # a lost cursor raises before anything is sent
            except CursorExpired as exc:
                self.send_error(410, str(exc))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            try:
                # Ends after 5 s without a change (a real service would send keep-alives).
                for change in store.watch(since=since, session_id=session_id, timeout=5):
                    body = json.dumps(asdict(change))
                    self.wfile.write(f"id: {change.cursor}\ndata: {body}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away; it resumes with Last-Event-ID

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the example's output to what the client sees

    return ChangeStream


def read_events(url: str, last_id: str | None, count: int) -> list[dict[str, object]]:
    """A minimal SSE client: read ``count`` events, then drop the connection."""
    request = urllib.request.Request(url)
    if last_id is not None:
        request.add_header("Last-Event-ID", last_id)
    events: list[dict[str, object]] = []
    with urllib.request.urlopen(request, timeout=10) as response:
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: "):]))
                if len(events) == count:
                    break
    return events


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(), "service.db")
    with Sessions.open(path) as store:
        server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(store))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/sessions/support/changes"
        chat = store.session("support")

        def writer() -> None:
            chat.append_message({"id": "q1", "role": "user",
                                 "parts": [{"type": "text", "text": "my deploy failed"}]})
            store.session("other").append_message(
                {"id": "x", "role": "user", "parts": []})  # another session: not streamed
            chat.append_message({"id": "a1", "role": "assistant",
                                 "parts": [{"type": "text", "text": "which step?"}]})
            chat.update_message({"id": "a1", "role": "assistant",
                                 "parts": [{"type": "text", "text": "which step failed?"}]})
            chat.append_message({"id": "q2", "role": "user",
                                 "parts": [{"type": "text", "text": "the migration"}]})
            chat.delete_messages(["q2"])

        cursor = store.change_cursor()
        timer = threading.Timer(0.3, writer)  # writes once the client is listening
        timer.start()
        first = read_events(url, str(cursor), 3)  # then the connection drops
        for e in first:
            print(f"event {e['cursor']}: {e['type']} {e['message_id']} leaf={e['leaf_id']}")
        print(f"client dropped; reconnecting with Last-Event-ID: {first[-1]['cursor']}")
        timer.join()
        rest = read_events(url, str(first[-1]["cursor"]), 2)
        for e in rest:
            print(f"event {e['cursor']}: {e['type']} {e['message_id'] or e['message_ids']} "
                  f"leaf={e['leaf_id']}")
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
