"""The ``convostore`` command line (issue 9, issue 2's demo): output, exit codes, errors.

Commands run in-process through ``main([...])`` with ``capsys``; the database is then checked
through the Python API. A few real subprocess runs check the entry point and exit codes. SQLite
only: these tests cover the CLI, the conformance suite covers the engines.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType

import pytest
from _helpers import ids, text
from conftest import PG_URL

from convostore import Sessions
from convostore.backends._engines import display_url, local_file, parse_url
from convostore.cli import build_parser, main
from convostore.cli._text import Output, visible, when

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


@pytest.fixture
def chat_db(tmp_path: Path) -> str:
    """Two sessions with fixed timestamps: ``support`` has a branch under m1, ``ops`` one row."""
    path = str(tmp_path / "chat.db")
    with Sessions.open(path) as store:
        support = store.session("support")
        support.import_message(text("m1", "hi"), parent_id=None, created_at=T0)
        support.import_message(text("m2", "hello", "assistant"), parent_id="m1",
                               created_at=T0 + 1000)
        support.import_message(text("m3", "hey there", "assistant"), parent_id="m1",
                               created_at=T0 + 2000)
        support.import_message(text("m4", "thanks"), parent_id="m3", created_at=T0 + 3000)
        store.session("ops").import_message(text("o1", "the deploy failed"), parent_id=None,
                                            created_at=T0 + 4000)
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- ls, stats ------------------------------------------------------------------------------


def test_ls_lists_sessions_with_counts_sizes_and_last_write(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["ls", chat_db], capsys) == (0, (
        "SESSION  MESSAGES  SIZE   LAST WRITE\n"
        "ops      1         78 B   2023-11-14 22:13:24 UTC\n"
        "support  4         276 B  2023-11-14 22:13:23 UTC\n"
    ), "")


def test_ls_shows_the_default_session_and_an_empty_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "x.db")
    with Sessions.open(path):
        pass
    assert run(["ls", path], capsys) == (0, "no sessions\n", "")
    with Sessions.open(path) as store:
        store.session().import_message(text("m1", "hi"), created_at=T0)
    assert run(["ls", path], capsys)[1].splitlines()[1] == (
        '""       1         63 B  2023-11-14 22:13:20 UTC'
    )


def test_ls_shows_titles_newest_first_with_the_managers_names(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from convostore.manager import SessionManager

    with Sessions.open(chat_db) as store:
        manager = SessionManager(store)
        info = manager.create("Deploy help")
        manager.append(info.id, text("d1", "why did it fail"))
        when = store.session(info.id).search("fail")[0].created_at
    code, out, err = run(["ls", chat_db], capsys)
    width = len(info.id)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"{'SESSION'.ljust(width)}  TITLE        MESSAGES  SIZE   LAST WRITE",
        f"{info.id}  Deploy help  1         76 B   "
        + datetime.fromtimestamp(when / 1000, tz=timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC"),
        f"{'ops'.ljust(width)}               1         78 B   2023-11-14 22:13:24 UTC",
        f"{'support'.ljust(width)}               4         276 B  2023-11-14 22:13:23 UTC",
    ]


def test_ls_filters_by_owner_and_metadata_and_prints_json(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Sessions.open(chat_db) as store:
        store.session("ops").update_info(owner="u\x1b1", title="Ops", metadata={"n": 1})
        store.session("support").update_info(owner="u2", metadata={"n": 2, "k": "x"})
        store.session("convostore:context:memory_ops").append_message(text("content", "m"))
    assert run(["ls", chat_db, "--owner", "u2"], capsys) == (0, (
        "SESSION  OWNER  MESSAGES  SIZE   LAST WRITE\n"
        "support  u2     4         276 B  2023-11-14 22:13:23 UTC\n"
    ), "")
    code, out, _ = run(["ls", chat_db, "--json"], capsys)
    listed = json.loads(out)
    assert code == 0 and [e["session_id"] for e in listed] == ["ops", "support"]
    assert listed[0] == {
        "session_id": "ops", "title": "Ops", "owner": "u\x1b1", "metadata": {"n": 1},
        "created_at": T0 + 4000, "updated_at": T0 + 4000, "message_count": 1, "bytes": 78,
        "expires_at": None,
    }
    code, out, _ = run(["ls", chat_db, "--meta", "n=2", "--json"], capsys)
    assert [e["session_id"] for e in json.loads(out)] == ["support"]
    code, out, _ = run(["ls", chat_db, "--meta", "n=2", "--meta", "k=y"], capsys)
    assert out == "no sessions\n"
    code, out, _ = run(["ls", chat_db, "--limit", "1"], capsys)
    assert len(out.splitlines()) == 2 and "\\x1b" in out  # the owner, escaped
    assert run(["ls", chat_db, "--owner", "nobody", "--json"], capsys) == (0, "[]\n", "")


def test_rm_deletes_a_conversation_and_says_which_were_missing(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["rm", chat_db, "ops"], capsys) == (0, "deleted ops\n", "")
    code, out, err = run(["rm", chat_db, "support", "ghost"], capsys)
    assert (code, out, err) == (1, "deleted support\n",
                                "convostore: error: no session ghost\n")
    assert run(["ls", chat_db], capsys) == (0, "no sessions\n", "")
    with Sessions.open(chat_db) as store:
        assert store.storage_stats().messages == 0


def test_prune_dry_run_then_prune(chat_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Sessions.open(chat_db) as store:
        store.session("fresh").append_message(text("f1", "new"))
        store.session("ops").update_info(owner="me")
    assert run(["prune", chat_db, "--older-than", "30d", "--dry-run"], capsys) == (0, (
        "would delete 2 sessions:\n  support\n  ops\n"), "")
    assert run(["prune", chat_db, "--older-than", "30d", "--owner", "me"], capsys) == (
        0, "deleted 1 session in 1 batch\n", "")
    assert run(["prune", chat_db, "--older-than", "2592000", "--batch-size", "1"], capsys) == (
        0, "deleted 1 session in 1 batch\n", "")
    assert run(["prune", chat_db, "--dry-run"], capsys) == (0, "would delete 0 sessions\n", "")
    code, _, err = run(["prune", chat_db, "--older-than", "soon"], capsys)
    assert code == 2 and "not a duration" in err
    code, _, err = run(["prune", chat_db, "--no-expired"], capsys)
    assert (code, err) == (1, "convostore: error: nothing to prune: give --older-than, or "
                              "drop --no-expired\n")
    assert run(["ls", chat_db], capsys)[1].splitlines()[1].startswith("fresh ")


def test_stats(chat_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["stats", chat_db], capsys) == (0, (
        "sessions           2\n"
        "messages           5\n"
        "continuation rows  0\n"
        "compactions        0\n"
        "attachments        0\n"
        "attachment bytes   0 (0 B)\n"
        "content bytes      354 (354 B)\n"
    ), "")


def test_stats_counts_the_sessions_ls_lists(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 (friction): `stats` said "sessions 5" where `ls` listed 2, counting the
    library's own context sessions; they get a line of their own."""
    with Sessions.open(chat_db) as store:
        store.session("convostore:context:support").append_message(text("c1", "memory"))
    code, out, _ = run(["stats", chat_db], capsys)
    assert code == 0 and out.splitlines()[:3] == [
        "sessions           2", "internal sessions  1", "messages           6"]
    assert len(run(["ls", chat_db], capsys)[1].splitlines()) == 3  # a header and 2 sessions


# --- show -----------------------------------------------------------------------------------


def test_show_prints_the_active_history(chat_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["show", chat_db, "support"], capsys) == (0, (
        "  1  user  m1\n"
        '       text "hi"\n'
        "  2  assistant  m3\n"
        '       text "hey there"\n'
        "  3  user  m4\n"
        '       text "thanks"\n'
    ), "")


def test_show_leaf_reads_another_branch(chat_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["show", chat_db, "support", "--leaf", "m2"], capsys)
    assert code == 0
    assert out == '  1  user  m1\n       text "hi"\n  2  assistant  m2\n       text "hello"\n'


def test_show_tree_draws_branches(chat_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["show", chat_db, "support", "--tree"], capsys) == (0, (
        'm1 user: text "hi"\n'
        '├─ m2 assistant: text "hello"\n'
        '└─ m3 assistant: text "hey there"\n'
        '   m4 user: text "thanks"  [← active leaf]\n'
    ), "")
    code, out, _ = run(["show", chat_db, "support", "--tree", "--leaf", "m2"], capsys)
    assert code == 0
    assert out.splitlines()[1] == '├─ m2 assistant: text "hello"  [← leaf]'
    assert "active leaf" not in out


def test_show_tree_draws_every_root_and_marks_compactions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "t.db")
    with Sessions.open(path) as store:
        s = store.session("s")
        s.append_message(text("other", "an older conversation"), parent_id=None)
        s.append_message(text("m1", "turn 1"), parent_id=None)
        for i in range(2, 5):
            s.append_message(text(f"m{i}", f"turn {i}"))
        s.add_compaction("summary", "m2", "m3")
    code, out, _ = run(["show", path, "s", "--tree"], capsys)
    assert code == 0
    assert out == (
        'other user: text "an older conversation"\n'
        'm1 user: text "turn 1"\n'
        'm2 user: text "turn 2"  [compaction starts]\n'
        'm3 user: text "turn 3"  [compaction ends]\n'
        'm4 user: text "turn 4"  [← active leaf]\n'
    )


def test_show_picks_the_only_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "one.db")
    with Sessions.open(path) as store:
        store.session("only").append_message(text("m1", "hi"))
    assert run(["show", path], capsys) == (0, '  1  user  m1\n       text "hi"\n', "")


def test_show_shows_overlays_and_part_previews(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "p.db")
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(100)).decode()
    with Sessions.open(path) as store:
        s = store.session()
        s.append_message({"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "line one\nline two"},
            {"type": "tool-search", "toolCallId": "c1", "state": "output-available",
             "input": {"q": "x"}, "output": {"hits": "y" * 3000}},
            {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{png}"},
            {"type": "source-url", "url": "https://example.com/a"},
            {"type": "data-weather", "data": {}},
            {"type": "text", "text": "z" * 100},
        ]})
        s.append_message(text("b", "second"))
        s.append_message(text("c", "third"))
        record = s.add_compaction("the gist", "b", "b")
    code, out, _ = run(["show", path], capsys)
    assert code == 0
    assert out == (
        "  1  assistant  a\n"
        "       step-start\n"
        '       reasoning "line one line two"\n'
        '       tool search output-available input {"q":"x"} output 2.9 KiB\n'
        "       file image/png 108 B\n"
        "       source-url https://example.com/a\n"
        "       data-weather\n"
        f'       text "{"z" * 71}…"\n'
        f"  2  assistant  compaction_{record.id}  (summary of compacted messages)\n"
        '       text "the gist"\n'
        "  3  user  c\n"
        '       text "third"\n'
    )


# --- search ---------------------------------------------------------------------------------


def test_search_across_sessions_and_in_one(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["search", chat_db, "deploy"], capsys) == (0, (
        "SESSION  MESSAGE  ROLE  TEXT\n"
        "ops      o1       user  the deploy failed\n"
    ), "")
    assert run(["search", chat_db, "hey", "--session", "support"], capsys) == (0, (
        "SESSION  MESSAGE  ROLE       TEXT\n"
        "support  m3       assistant  hey there\n"
    ), "")
    assert run(["search", chat_db, "deploy", "--session", "support"], capsys) == (
        0, "no matches\n", "")


def test_search_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s.db")
    with Sessions.open(path) as store:
        for i in range(5):
            store.session().append_message(text(f"m{i}", f"apple number {i}"))
    code, out, _ = run(["search", path, "apple", "--limit", "2"], capsys)
    assert code == 0
    assert len(out.splitlines()) == 3  # header and two hits


# --- export and import ----------------------------------------------------------------------


def test_export_writes_json_lines_root_to_leaf(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["export", chat_db, "support"], capsys)
    assert (code, err) == (0, "")
    parts = '"parts":[{"type":"text","text":'
    assert out == (
        f'{{"parent_id":null,"message":{{"id":"m1","role":"user",{parts}"hi"}}]}}}}\n'
        f'{{"parent_id":"m1","message":{{"id":"m3","role":"assistant",{parts}"hey there"}}]}}}}\n'
        f'{{"parent_id":"m3","message":{{"id":"m4","role":"user",{parts}"thanks"}}]}}}}\n'
    )
    code, out, _ = run(["export", chat_db, "support", "--leaf", "m2"], capsys)
    assert [json.loads(line)["message"]["id"] for line in out.splitlines()] == ["m1", "m2"]


def test_demo_session_round_trips_through_export_and_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(tmp_path / "demo.db")
    assert main(["demo", src]) == 0
    capsys.readouterr()
    code, exported, _ = run(["export", src, "demo"], capsys)
    assert code == 0
    dump = tmp_path / "demo.jsonl"
    dump.write_text(exported, encoding="utf-8")

    dst = str(tmp_path / "copy.db")
    assert run(["import", dst, "copy", str(dump)], capsys) == (
        0, "imported 6 messages into session copy\n", "")
    with Sessions.open(src) as a, Sessions.open(dst) as b:
        original = a.session("demo").get_history()
        assert b.session("copy").get_history() == original
        assert ids(original)[:3] == ["u1", "a1", "a2"]  # a1 holds the 200 KB tool result
        assert original[3]["id"].startswith("compaction_")  # the image was compacted away
        assert b.storage_stats().messages == 6

    # Idempotent: a second import adds nothing.
    assert run(["import", dst, "copy", str(dump)], capsys) == (
        0, "imported 0 messages into session copy (6 were already there)\n", "")


def test_import_from_stdin_keeps_any_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = str(tmp_path / "a.db")
    odd = {"id": "x1", "role": "user", "metadata": {"z": 1, "a": [1.5, None, True]},
           "parts": [{"type": "text", "text": "lone \ud800 surrogate, é 漢 🎉"}]}
    with Sessions.open(src) as store:
        store.session("s").append_message(odd)
        store.session("s").append_message(text("x2", "next", "assistant"))
    code, exported, _ = run(["export", src, "s"], capsys)
    assert code == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO(exported))
    assert run(["import", src, "t", "-"], capsys) == (
        0, "imported 2 messages into session t\n", "")
    with Sessions.open(src) as store:
        history = store.session("t").get_history()
        assert history == store.session("s").get_history()
        assert history[0] == odd
        assert list(history[0]["metadata"]) == ["z", "a"]


def test_import_without_parent_ids_chains_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "in.jsonl"
    dump.write_text(
        json.dumps({"message": text("a", "one")}) + "\n\n"
        + json.dumps({"message": text("b", "two"), "created_at": T0}) + "\n"
        + json.dumps({"parent_id": None, "message": text("c", "three")}) + "\n",
        encoding="utf-8",
    )
    path = str(tmp_path / "new.db")
    assert run(["import", path, "s", str(dump)], capsys)[0] == 0
    with Sessions.open(path) as store:
        s = store.session("s")
        assert ids(s.get_history(leaf_id="b")) == ["a", "b"]
        assert ids(s.get_history()) == ["c"]
        assert store.list_sessions()[0].last_write > T0  # c was written now


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json\n", "line 2: not valid JSON (Expecting property name enclosed in double "
                        "quotes: line 1 column 2 (char 1))"),
        ("[1, 2]\n", 'line 2: expected {"parent_id": ..., "message": {...}}'),
        ('{"parent_id": 5, "message": {"id": "b", "role": "user", "parts": []}}\n',
         "line 2: parent_id must be a string or null"),
        ('{"created_at": "today", "message": {"id": "b", "role": "user", "parts": []}}\n',
         "line 2: created_at must be epoch milliseconds from 0 to 253402300799999 (year 9999)"),
        ('{"message": {"id": 7, "role": "user", "parts": []}}\n',
         "line 2: message field 'id': expected a string, got int"),
    ],
)
def test_import_reports_the_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, problem: str
) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_text(json.dumps({"message": text("a", "ok")}) + "\n" + content, encoding="utf-8")
    path = str(tmp_path / "b.db")
    assert run(["import", path, "s", str(dump)], capsys) == (
        1, "", f"convostore: error: {dump} {problem}\n")
    with Sessions.open(path) as store:  # all or nothing per batch: the good line is not kept
        assert ids(store.session("s").get_history()) == []


def test_import_of_a_missing_file_creates_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "never.db"
    missing = tmp_path / "missing.jsonl"
    assert run(["import", str(path), "s", str(missing)], capsys) == (
        1, "", f"convostore: error: cannot read {missing}: No such file or directory\n")
    assert not path.exists()


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["ls"], ["show"], ["search", "--", "q"], ["export", "--", "s"],
                                     ["stats"]])
def test_read_commands_do_not_create_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "missing.db"
    argv = [command[0], str(path), *[a for a in command[1:] if a != "--"]]
    assert run(argv, capsys) == (1, "", f"convostore: error: no convostore data at {path}\n")
    assert not path.exists()


def test_unknown_session_and_leaf_are_errors(
    chat_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["show", chat_db, "nope"], ["export", chat_db, "nope"],
                 ["search", chat_db, "hi", "--session", "nope"]):
        assert run(argv, capsys) == (1, "", f"convostore: error: no session nope in {chat_db}\n")
    assert run(["show", chat_db], capsys) == (
        1, "", f'convostore: error: no session "" in {chat_db}\n')
    assert run(["show", chat_db, "support", "--leaf", "zz"], capsys) == (
        1, "", "convostore: error: no message 'zz' in session support\n")
    assert run(["export", chat_db, "support", "--leaf", "o1"], capsys) == (
        1, "", "convostore: error: no message 'o1' in session support\n")


def test_bad_url_and_bad_file_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ls", "mysql://host/db"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("convostore: error: cannot open 'mysql://host/db': unknown scheme")
    assert err.count("\n") == 1
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n")
    code, out, err = run(["stats", str(junk)], capsys)
    assert (code, out) == (1, "")
    assert err == (
        f"convostore: error: cannot open SQLite database '{junk}': file is not a database\n"
    )


def test_usage_errors_exit_2(chat_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([], capsys)
    assert code == 2
    assert "error: the following arguments are required: COMMAND" in err
    code, _, err = run(["search", chat_db, "x", "--limit", "many"], capsys)
    assert code == 2
    assert "argument --limit: invalid int value: 'many'" in err
    assert run(["--version"], capsys) == (0, "convostore 0.1.0\n", "")


# --- demo -----------------------------------------------------------------------------------


def test_demo_writes_a_realistic_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.db"
    code, out, err = run(["demo", str(path)], capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"convostore demo: writing a conversation to {path}\n")
    for fragment in [
        "  compacted u2..a4 into a summary",
        "├─ a3 assistant: ",
        "└─ a3-retry assistant: ",
        "   a5 assistant: ",
        "[← active leaf]",
        "== Active history (what a model is sent; a summary replaces u2..a4) ==",
        "(summary of compacted messages)",
        "       tool fetch_build_log output-available input "
        '{"job":"deploy-nightly","run":4812} output 199.5 KiB\n',
        "attachments        1\n",
        "compactions        1\n",
        "demo     a2       assistant  Build and tests passed",
        f"  convostore show {path} demo --tree\n",
    ]:
        assert fragment in out

    with Sessions.open(str(path)) as store:
        s = store.session("demo")
        assert ids(s.get_branches("u2")) == ["a3", "a3-retry"]
        assert s.get_history()[3]["id"].startswith("compaction_")
        assert ids(s.get_history()) == ["u1", "a1", "a2", s.get_history()[3]["id"], "u4", "a5"]
        compaction = s.get_compactions()[0]
        assert (compaction.from_message_id, compaction.to_message_id) == ("u2", "a4")
        assert "- user: How do we keep this from happening again?" in compaction.summary
        tool = s.get_message("a1")["parts"][2]  # type: ignore[index]
        assert tool["type"] == "tool-fetch_build_log"
        assert tool["toolCallId"] == "call_fetch_1"
        assert 195_000 < len(json.dumps(tool["output"], separators=(",", ":"))) < 215_000
        image = s.get_message("u2")["parts"][1]  # type: ignore[index]
        data = base64.b64decode(image["url"].split(",", 1)[1])
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IEND" in data
        stats = store.storage_stats()
        assert (stats.messages, stats.attachments, stats.attachment_bytes) == (10, 1, len(data))
        assert [h.id for h in s.search("lock timeout")] == ["a4", "a2"]


def test_demo_starts_fresh_and_never_deletes_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0  # default path
    with Sessions.open("convostore-demo.db") as store:
        store.session("other").append_message(text("x", "left over"))
    code, out, _ = run(["demo"], capsys)
    assert code == 0
    assert "removed the existing convostore-demo.db to start fresh\n" in out
    with Sessions.open("convostore-demo.db") as store:
        assert [s.session_id for s in store.list_sessions()] == ["demo"]
        assert store.storage_stats().messages == 10

    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    assert run(["demo", str(notes)], capsys) == (
        1, f"convostore demo: writing a conversation to {notes}\n",
        f"convostore: error: {notes} exists and is not a SQLite database; not deleting it\n")
    assert notes.read_text() == "precious"


# --- issue 18: one-line failures, visible control characters, read-only reads -------------
# These run on both engines: a SQLite file, and a PostgreSQL database of the test's own (the
# command line takes a URL, not the suite's schema= option).


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database (dropped afterwards); tests that take it are
    marked ``postgres_server`` (not collected without a server)."""
    assert PG_URL is not None, "a test taking pg_url is marked postgres_server"
    import psycopg

    name = f"cs_cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(PG_URL, dbname=name)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite-file",
                        pytest.param("postgres", marks=pytest.mark.postgres_server)])
def cli_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty database the command line may use: a file path that does not exist
    yet, or a new PostgreSQL database (:func:`pg_url`)."""
    if request.param == "sqlite-file":
        return str(tmp_path / "cli.db")
    return str(request.getfixturevalue("pg_url"))


def _tables(url: str) -> list[str]:
    """The tables of the database at ``url``, looked at with the driver (no store opened)."""
    target = local_file(url)
    if target is not None:
        if not os.path.exists(target):
            return []
        with closing(sqlite3.connect(f"file:{target}?mode=ro", uri=True)) as conn:
            return [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname NOT IN "
            "('pg_catalog', 'information_schema')")]


def _import(url: str, session: str, lines: list[object], capsys: pytest.CaptureFixture[str],
            tmp_path: Path) -> tuple[int, str, str]:
    dump = tmp_path / "in.jsonl"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return run(["import", url, session, str(dump)], capsys)


@pytest.mark.parametrize("command", [["ls"], ["show"], ["search", "q"], ["export", "s"],
                                     ["stats"]])
def test_read_commands_leave_an_empty_database_empty(
    cli_url: str, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Issue 18 item 10: `stats empty.txt` made a database of an empty file, `ls` on an empty
    PostgreSQL database created the tables."""
    path = local_file(cli_url)
    if path is not None:
        Path(path).write_bytes(b"")
    shown = display_url(cli_url)
    assert run([command[0], cli_url, *command[1:]], capsys) == (
        1, "", f"convostore: error: no convostore data at {shown}\n")
    assert _tables(cli_url) == []
    if path is not None:
        assert os.path.getsize(path) == 0


@pytest.mark.postgres_server
def test_a_libpq_key_value_string_opens_postgresql_and_hides_its_password(
    pg_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 18 item 10: ``host=... dbname=...`` became a SQLite file of that name; a password
    never shows, in either form."""
    import psycopg

    monkeypatch.chdir(tmp_path)
    fields = psycopg.conninfo.conninfo_to_dict(pg_url)
    keyvalue = " ".join(f"{k}={v}" for k, v in fields.items()) + " password=s3cret"
    assert parse_url(keyvalue).engine.name == "postgres"
    assert parse_url("./host=x.db").engine.name == "sqlite"
    assert parse_url("host=x.db notakey=1").engine.name == "sqlite"
    code, out, err = run(["ls", keyvalue], capsys)
    assert (code, out) == (1, "")
    assert err == f"convostore: error: no convostore data at {display_url(keyvalue)}\n"
    assert "password=***" in err
    assert _import(keyvalue, "s", [{"message": text("m1", "hi")}], capsys, tmp_path)[0] == 0
    code, out, err = run(["ls", keyvalue], capsys)
    assert (code, out.splitlines()[1].split()[:2], err) == (0, ["s", "1"], "")
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]  # no file named like the string
    for unreachable in (f"host={fields['host']} port=1 password=s3cret",
                        f"postgresql://{fields['user']}:s3cret@{fields['host']}:1/x"):
        code, out, err = run(["show", unreachable, "s"], capsys)
        assert (code, out, err.count("\n")) == (1, "", 1)
        assert err.startswith("convostore: error: cannot open PostgreSQL database")
        assert "s3cret" not in err


@pytest.mark.postgres_server
def test_demo_never_shows_a_password(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 18 item 10, the same leak elsewhere: demo printed its URL, password included."""
    import psycopg

    url = psycopg.conninfo.make_conninfo(pg_url, password="s3cret")
    code, out, err = run(["demo", url], capsys)
    assert (code, err) == (0, "")
    assert "s3cret" not in out and "password=***" in out


HOSTILE_SESSION = "s\x1b]0;pwned\x07"
HOSTILE = {"id": "m\x1b[2J", "role": "user\x1b[31m", "parts": [
    {"type": "text", "text": "deploy \x1b]8;;http://evil\x07link\x1b]8;;\x07 \u202eok\x85"}]}


def test_control_characters_in_stored_data_are_shown_visibly(
    cli_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 18 item 9: escapes in session ids, message ids, roles and text were printed raw.
    Human-readable output shows them as escapes; export stays exact."""
    assert _import(cli_url, HOSTILE_SESSION, [{"message": HOSTILE}], capsys, tmp_path)[0] == 0
    outputs = {
        "ls": run(["ls", cli_url], capsys),
        "show": run(["show", cli_url, HOSTILE_SESSION], capsys),
        "tree": run(["show", cli_url, HOSTILE_SESSION, "--tree"], capsys),
        "search": run(["search", cli_url, "deploy"], capsys),
        "missing": run(["show", cli_url, "x\x1b[2J"], capsys),
    }
    for name, (_code, out, err) in outputs.items():
        shown = out + err
        assert not any(c in shown for c in "\x1b\x07\u202e\x85\udc80"), name
        assert "\\x1b" in shown, name
    assert outputs["ls"][1].splitlines()[1].startswith("s\\x1b]0;pwned\\x07  1 ")
    assert outputs["show"][1].splitlines()[0] == "  1  user\\x1b[31m  m\\x1b[2J"
    assert outputs["missing"] == (
        1, "", f"convostore: error: no session x\\x1b[2J in {display_url(cli_url)}\n")
    code, out, err = run(["export", cli_url, HOSTILE_SESSION], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out) == {"parent_id": None, "message": HOSTILE}


def test_a_lone_surrogate_in_stored_text_is_shown_not_a_traceback(
    cli_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 18 items 8 and 9: text may hold a lone surrogate (it round-trips), and writing it
    to a UTF-8 stdout raised UnicodeEncodeError; it is shown as its escape."""
    message = text("m1", "half \udc80 a pair")
    assert _import(cli_url, "s", [{"message": message}], capsys, tmp_path)[0] == 0
    assert run(["show", cli_url, "s"], capsys) == (
        0, '  1  user  m1\n       text "half \\udc80 a pair"\n', "")
    code, out, err = run(["export", cli_url, "s"], capsys)
    assert (code, err, json.loads(out)["message"]) == (0, "", message)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rich_output_shows_control_characters_and_reads_no_markup() -> None:
    """Issue 18 item 9, the rich side: cells were read as markup (a stored ``[link=...]``
    became a link) and escapes reached the terminal."""
    pytest.importorskip("rich")
    stream = _Terminal()
    out = Output(stream)
    assert out.console is not None
    out.table(["SESSION", "TEXT"], [["[link=http://evil]s[/link]", "a\x1b]0;x\x07b"]])
    out.line("m\x1b[2J [bold]x[/bold]")
    shown = stream.getvalue()
    assert "[link=http://evil]s[/link]" in shown and "[bold]x[/bold]" in shown
    assert "\x1b]" not in shown and "\x07" not in shown and "\x1b[2J" not in shown
    assert "a\\x1b]0;x\\x07b" in shown and "m\\x1b[2J" in shown


def test_visible_and_out_of_range_times() -> None:
    assert visible("a\x00b\x1b\x7f\x9b\u202e\u2028\udc80 é ✓") == (
        "a\\x00b\\x1b\\x7f\\x9b\\u202e\\u2028\\udc80 é ✓")
    assert when(10**17) == "100000000000000000 ms since 1970"
    assert when(-(2**63)) == f"{-(2**63)} ms since 1970"


RANGE = "created_at must be epoch milliseconds from 0 to 253402300799999 (years 1970 to 9999)"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"message": {"id": "a", "role": "user", "parts": [' + "[" * 100_000
         + "]" * 100_000 + "]}}",
         "message field 'parts[0][0][0][0][0]...[0][0]': nested more than 128 levels deep"),
        ('{"message": {"id": "\\udc80", "role": "user", "parts": []}}',
         "message field 'id': must not contain a lone surrogate (U+DC80)"),
        ('{"parent_id": "\\ud800", "message": {"id": "a", "role": "user", "parts": []}}',
         "parent_id must not contain a lone surrogate (U+D800)"),
        ('{"created_at": 100000000000000000, "message": {"id": "a", "role": "user", '
         '"parts": []}}', f"{RANGE}, not 100000000000000000"),
        ('{"created_at": 9223372036854775808, "message": {"id": "a", "role": "user", '
         '"parts": []}}', f"{RANGE}, not 9223372036854775808"),
        ('{"created_at": -1, "message": {"id": "a", "role": "user", "parts": []}}',
         f"{RANGE}, not -1"),
        ('{"created_at": 1e999, "message": {"id": "a", "role": "user", "parts": []}}',
         "created_at must be epoch milliseconds from 0 to 253402300799999 (year 9999)"),
    ],
)
def test_import_failures_are_one_line_and_ls_still_works(
    cli_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str,
    problem: str | None,
) -> None:
    """Issue 18 item 8: deep JSON, lone surrogates and absurd times gave tracebacks, or were
    stored so that `ls` could not print them."""
    dump = tmp_path / "bad.jsonl"
    dump.write_text(line + "\n", encoding="utf-8")
    assert run(["import", cli_url, "s", str(dump)], capsys) == (
        1, "", f"convostore: error: {dump} line 1: {problem}\n")
    assert run(["ls", cli_url], capsys) == (0, "no sessions\n", "")


def test_bad_arguments_are_one_line_errors(
    cli_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 18 item 8: ids from the command line that are not UTF-8 (lone surrogates), and
    a search limit no engine takes, gave tracebacks."""
    assert _import(cli_url, "s", [{"message": text("m1", "hi")}], capsys, tmp_path)[0] == 0
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe{}\n")
    for argv, problem in [
        (["show", cli_url, "s", "--leaf", "\udcff"], "--leaf is not valid UTF-8: \\udcff"),
        (["export", cli_url, "s", "--leaf", "\udcff"], "--leaf is not valid UTF-8: \\udcff"),
        (["search", cli_url, "h\udcffi"], "QUERY is not valid UTF-8: h\\udcffi"),
        (["search", cli_url, "hi", "--limit", str(2**63)],
         "--limit must be from 1 to 10000, not 9223372036854775808"),
        (["search", cli_url, "hi", "--limit", "0"], "--limit must be from 1 to 10000, not 0"),
        (["import", cli_url, "\udcff", str(tmp_path / "in.jsonl")],
         "SESSION is not valid UTF-8: \\udcff"),
        (["show", cli_url, "\udcff"], f"no session \\udcff in {display_url(cli_url)}"),
        (["import", cli_url, "s", str(binary)],
         "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
    ]:
        assert run(argv, capsys) == (1, "", f"convostore: error: {problem}\n"), argv


# --- subprocess: the real entry point -------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "convostore", *args], cwd=cwd,
                          capture_output=True, text=True, encoding="utf-8", timeout=60)


def test_subprocess_demo_then_show(tmp_path: Path) -> None:
    done = _cli("demo", "d.db", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert "== Tree of session 'demo' (every message; branches drawn) ==" in done.stdout
    shown = _cli("show", "d.db", "demo", "--leaf", "a3", cwd=tmp_path)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout.splitlines()[-2:] == [
        "  5  assistant  a3",
        '       text "Probably: the spike is at about the same time as the failure."',
    ]


def test_subprocess_exit_codes(tmp_path: Path) -> None:
    missing = _cli("show", "missing.db", cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == "convostore: error: no convostore data at missing.db\n"
    assert not (tmp_path / "missing.db").exists()
    usage = _cli(cwd=tmp_path)
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: convostore ")
    assert "Traceback" not in missing.stderr + usage.stderr


# --- docs -----------------------------------------------------------------------------------


def _gen_cli_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "tools/gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current_and_complete() -> None:
    gen = _gen_cli_docs()
    docs = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    assert docs == gen.render(), "docs/cli.md is stale: run python tools/gen_cli_docs.py"
    commands = gen.commands(build_parser())
    assert list(commands) == ["demo", "ls", "show", "search", "export", "import", "index",
                             "stats", "rm", "prune", "dump", "restore", "migrate", "check",
                             "serve", "mcp"]
    for name, parser in commands.items():
        assert f"## `convostore {name}`" in docs
        assert parser.description, f"{name} has no description"
