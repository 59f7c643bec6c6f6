"""``convostore check DB [--repair] [--json]``: the report, the exit status, the repair."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _helpers import text

from convostore import Sessions
from convostore.cli import main


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "chat.db")
    with Sessions.open(path) as store:
        store.session("s").append_messages([text("a", "hello"), text("b", "world")])
        store.session("").append_message(text("x", "default"))
    return path


def damage(db: str, sql: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    conn.close()


def test_a_sound_store(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", db]) == 0
    assert capsys.readouterr().out == "\nchecked 2 sessions, 3 messages: no problems\n"


def test_problems_found_then_repaired(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    damage(db, "UPDATE convostore_sessions SET message_count = message_count + 4 "
               "WHERE session_id = 's'")
    damage(db, "UPDATE convostore_messages SET content = '[' WHERE session_id = '' AND id = 'x'")
    assert main(["check", db]) == 3
    assert capsys.readouterr().out == (
        '\n== session "" ==\n'
        "unreadable_message x: JSONDecodeError: Expecting value: line 1 column 2 (char 1) "
        "(cannot be repaired)\n"
        "\n== session s ==\n"
        "directory_counts s: the directory says 6 messages, "
        f"{_bytes(db)} bytes; stored: 2 messages, {_bytes(db)} bytes (repairable)\n"
        "\nchecked 2 sessions, 3 messages: 2 problems (1 repairable with --repair)\n"
    )
    assert main(["check", db, "--repair"]) == 3  # the unreadable message is left
    out = capsys.readouterr().out
    assert "(repaired)" in out and out.endswith(": 2 problems, 1 repaired, 1 left\n")
    damage(db, "DELETE FROM convostore_messages WHERE session_id = '' AND id = 'x'")
    assert main(["check", db]) == 0


def _bytes(db: str) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT sum(bytes) FROM convostore_messages "
                           "WHERE session_id = 's'").fetchone()
    conn.close()
    return int(row[0])


def test_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    damage(db, "UPDATE convostore_messages SET parent_id = 'ghost' WHERE session_id = 's' "
               "AND id = 'b'")
    assert main(["check", db, "--json", "--repair"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["repair"] is True
    assert {(p["kind"], p["session_id"], p["subject"], p["repaired"])
            for p in report["problems"]} == {
        ("missing_parent", "s", "b", True), ("chain_flag", "s", "b", True)}
    assert main(["check", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True, "sessions": 2, "messages": 3, "repair": False, "problems": []}


def test_no_store_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "none.db")
    assert main(["check", missing]) == 1
    assert "no convostore data" in capsys.readouterr().err
    assert not Path(missing).exists()
