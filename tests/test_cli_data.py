"""The command line's bulk commands (dump, restore, migrate, import in batches, index with a
progress bar) and the --json output of show, search and stats."""

from __future__ import annotations

import base64
import io
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _helpers import ids, text
from conftest import PG_URL
from test_cli import run

from convostore import Sessions
from convostore.cli._data import IMPORT_BATCH
from convostore.dump import VERSION

T0 = 1_700_000_000_000


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def other_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new PostgreSQL database (dropped afterwards) when a server is configured, else a
    second SQLite file: where dumps are restored and stores migrated to."""
    if not PG_URL:
        yield str(tmp_path / "other.db")
        return
    import psycopg

    name = f"cs_cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(PG_URL, dbname=name)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A store with a branch, a compaction, an image and two sessions."""
    path = str(tmp_path / "chat.db")
    png = base64.b64encode(b"\x89PNG" + bytes(range(256))).decode()
    with Sessions.open(path) as store:
        s = store.session("support")
        s.import_messages([text("m1", "the deploy failed"), text("m2", "lock timeout", "assistant"),
                           text("m3", "why?")], created_at=T0)
        s.import_message(text("m2b", "another answer", "assistant"), parent_id="m1",
                         created_at=T0 + 1)
        s.add_compaction("summary", "m1", "m2")
        store.session("ops").append_message({"id": "o1", "role": "user", "parts": [
            {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{png}"}]})
    return path


# --- --json ---------------------------------------------------------------------------------


def test_show_json_is_the_history_as_read(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["show", db, "support", "--json"], capsys)
    assert (code, err) == (0, "")
    shown = json.loads(out)
    with Sessions.open(db) as store:
        expected = store.session("support").get_history()
    assert shown == {"session": "support", "leaf_id": None, "messages": expected}
    assert ids(shown["messages"]) == ["m1", "m2b"]
    code, out, _ = run(["show", db, "support", "--json", "--leaf", "m3"], capsys)
    shown = json.loads(out)
    assert shown["leaf_id"] == "m3"
    assert ids(shown["messages"])[0].startswith("compaction_")  # the overlay, as read
    assert ids(shown["messages"])[1:] == ["m3"]


def test_show_tree_json_holds_every_message_with_its_parent(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["show", db, "support", "--tree", "--json"], capsys)
    assert (code, err) == (0, "")
    tree = json.loads(out)
    assert tree["session"] == "support" and tree["active_leaf"] == "m2b"
    assert [(c["from_message_id"], c["to_message_id"], c["summary"])
            for c in tree["compactions"]] == [("m1", "m2", "summary")]
    assert [(e["parent_id"], e["message"]["id"]) for e in tree["messages"]] == [
        (None, "m1"), ("m1", "m2"), ("m2", "m3"), ("m1", "m2b")]
    assert tree["messages"][2]["message"] == text("m3", "why?")


def test_search_and_stats_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["search", db, "deploy", "--json"], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out) == [{"id": "m1", "role": "user", "content": "the deploy failed",
                                "created_at": T0, "session_id": "support"}]
    assert json.loads(run(["search", db, "nothing-like-this", "--json"], capsys)[1]) == []
    code, out, err = run(["stats", db, "--json"], capsys)
    stats = json.loads(out)
    assert (code, err) == (0, "")
    assert stats["sessions"] == 2 and stats["messages"] == 5 and stats["attachments"] == 1
    assert set(stats) == {"sessions", "messages", "continuation_rows", "compactions",
                          "attachments", "attachment_bytes", "content_bytes"}


# --- dump, restore, migrate -----------------------------------------------------------------


def test_dump_restore_to_the_other_engine_and_dump_again(
    db: str, other_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, dumped, err = run(["dump", db], capsys)
    assert (code, err) == (0, "")  # no terminal: no progress bar, no summary on stderr
    lines = [json.loads(line) for line in dumped.splitlines()]
    assert lines[0] == {"type": "header", "format": "convostore-dump", "version": VERSION}
    assert lines[-1] == {"type": "end", "sessions": 2, "messages": 5, "compactions": 1,
                         "attachments": 1, "directory": 2}
    path = tmp_path / "backup.jsonl"
    path.write_text(dumped, encoding="utf-8")
    assert run(["restore", other_db, str(path)], capsys) == (0, (
        "restored 5 messages, 1 compactions, 1 attachments and 2 directory rows of 2 "
        "sessions\n"), "")
    assert run(["dump", other_db], capsys) == (0, dumped, "")
    assert run(["restore", other_db, str(path)], capsys)[1] == (
        "restored 0 messages, 0 compactions, 0 attachments and 0 directory rows of 2 sessions "
        "(9 records were already there)\n")
    out_file = tmp_path / "again.jsonl"
    assert run(["dump", other_db, "-o", str(out_file)], capsys)[1].startswith("dumped 5 ")
    assert out_file.read_text(encoding="utf-8") == dumped


def test_restore_names_the_broken_line_and_refuses_a_newer_format(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run(["dump", db], capsys)[1].splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(lines[:3]) + lines[3][:20], encoding="utf-8")
    target = str(tmp_path / "copy.db")
    code, out, err = run(["restore", target, str(broken)], capsys)
    assert (code, out) == (1, "")
    assert err.startswith(f"convostore: error: {broken} line 4: not valid JSON")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"type": "header", "format": "convostore-dump",
                                 "version": VERSION + 1}) + "\n", encoding="utf-8")
    assert run(["restore", target, str(newer)], capsys) == (1, "", (
        f"convostore: error: dump format version {VERSION + 1} is newer than this convostore "
        f"reads ({VERSION}); upgrade convostore to restore it\n"))


def test_migrate_copies_the_store_and_runs_again_harmlessly(
    db: str, other_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["migrate", db, other_db], capsys) == (0, (
        "copied 5 messages, 1 compactions, 1 attachments and 2 directory rows of 2 "
        "sessions\n"), "")
    assert run(["migrate", db, other_db], capsys)[1].endswith(
        "(9 records were already there)\n")
    assert run(["dump", other_db], capsys)[1] == run(["dump", db], capsys)[1]
    missing = str(Path(db).with_name("missing.db"))
    assert run(["migrate", missing, other_db], capsys) == (
        1, "", f"convostore: error: no convostore data at {missing}\n")


def test_dump_of_a_missing_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    assert run(["dump", str(missing)], capsys) == (
        1, "", f"convostore: error: no convostore data at {missing}\n")
    assert not missing.exists()


# --- import in batches ----------------------------------------------------------------------


def test_a_half_valid_import_is_all_or_nothing_per_batch_and_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_at = IMPORT_BATCH + 20  # in the second batch
    lines = [json.dumps({"message": text(f"m{i}", f"line {i}")}) for i in range(1, bad_at)]
    lines.append(json.dumps({"message": {"id": "m-bad", "role": "user", "parts": 5}}))
    lines += [json.dumps({"message": text(f"n{i}", "after")}) for i in range(5)]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    target = str(tmp_path / "t.db")
    assert run(["import", target, "s", str(path)], capsys) == (1, "", (
        f"convostore: error: {path} line {bad_at}: message field 'parts': expected a "
        "list, got int\n"))
    with Sessions.open(target) as store:
        history = ids(store.session("s").get_history())
    assert history == [f"m{i}" for i in range(1, IMPORT_BATCH + 1)]  # the first batch only


# --- progress bars --------------------------------------------------------------------------


def test_progress_bars_draw_on_a_terminal_only(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("rich")
    out_file = tmp_path / "d.jsonl"
    assert run(["dump", db, "-o", str(out_file)], capsys)[2] == ""  # not a terminal: quiet
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main_ok(["dump", db, "-o", str(out_file)])
    assert main_ok(["index", db])
    assert main_ok(["restore", str(tmp_path / "copy.db"), str(out_file)])
    drawn = terminal.getvalue()
    assert "dump" in drawn and "index" in drawn and "restore" in drawn
    assert "messages" in drawn and "bytes" in drawn


def main_ok(argv: list[str]) -> bool:
    from convostore.cli import main

    return main(argv) == 0
