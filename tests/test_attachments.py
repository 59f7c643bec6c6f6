"""Attachments: media out of line, content-addressed, collected when unreferenced (§4, §11.2)."""

from __future__ import annotations

import base64
import hashlib
import threading
from typing import Any

import pytest
from _helpers import ids, text
from _storage import count_rows, stored_row

from convostore import ChangeEvent, InvalidMessage, Sessions
from convostore.codec import POINTER_PREFIX

# payloads shared across sessions, referenced from partitioned tables
pytestmark = pytest.mark.partitions


def payload(n: int, seed: int = 0) -> bytes:
    """n pseudo-random bytes (incompressible, distinct per seed)."""
    out = bytearray()
    block = hashlib.sha256(f"seed-{seed}".encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


def image(id: str, data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    b64 = base64.b64encode(data).decode()
    return {
        "id": id,
        "role": "user",
        "parts": [
            {"type": "text", "text": "look at this"},
            {"type": "file", "mediaType": media_type, "url": f"data:{media_type};base64,{b64}"},
        ],
    }


def refs(store: Sessions) -> int:
    return count_rows(store, "convostore_attachment_refs")


def payload_chunks(store: Sessions) -> int:
    return count_rows(store, "convostore_attachment_chunks")


def test_stores_media_outside_the_row_and_reads_it_back_verbatim(store: Sessions) -> None:
    s = store.session()
    msg = image("img", payload(300_000))
    assert s.append_message(msg).message == msg
    row = stored_row(store, "", "img")
    assert len(row.encode()) < 1000
    assert POINTER_PREFIX in row
    stats = store.storage_stats()
    assert (stats.attachments, stats.attachment_bytes, stats.continuation_rows) == (1, 300_000, 0)
    assert refs(store) == 1
    assert s.get_message("img") == msg
    assert s.get_history() == [msg]
    assert list(s.history(newest_first=True)) == [msg]


def test_never_extracts_text_which_chunks_instead(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("t", "x" * 2_000_000))
    st = store.storage_stats()
    assert st.attachments == 0 and st.continuation_rows > 0


def test_leaves_a_text_data_url_in_the_message(store: Sessions) -> None:
    s = store.session()
    b64 = base64.b64encode(b"hello text").decode()
    msg = {
        "id": "t",
        "role": "user",
        "parts": [
            {"type": "file", "mediaType": "text/plain", "url": f"data:text/plain;base64,{b64}"}
        ],
    }
    s.append_message(msg)
    assert store.storage_stats().attachments == 0
    assert s.get_message("t") == msg


def test_remote_urls_and_non_base64_data_urls_stay_inline(store: Sessions) -> None:
    s = store.session()
    msg = {
        "id": "r",
        "role": "user",
        "parts": [
            {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png,rawbytes"},
        ],
    }
    s.append_message(msg)
    assert store.storage_stats().attachments == 0
    assert s.get_message("r") == msg


def test_stores_one_record_when_the_same_payload_arrives_twice(store: Sessions) -> None:
    s = store.session()
    data = payload(50_000)
    a, b = image("a", data), image("b", data)
    s.append_message(a)
    s.append_message(b)
    assert store.storage_stats().attachments == 1
    assert refs(store) == 2
    assert s.get_history() == [a, b]


def test_identical_payloads_are_shared_across_sessions(store: Sessions) -> None:
    data = payload(10_000)
    store.session("x").append_message(image("a", data))
    store.session("y").append_message(image("a", data))
    assert store.storage_stats().attachments == 1
    store.session("x").clear_messages()
    assert store.storage_stats().attachments == 1
    assert store.session("y").get_message("a") == image("a", data)
    store.session("y").delete_messages(["a"])
    assert store.storage_stats().attachments == 0


def test_splits_a_payload_larger_than_one_row(store: Sessions) -> None:
    s = store.session()
    msg = image("big", payload(1536 * 1024 + 500_000))
    s.append_message(msg)
    assert payload_chunks(store) == 2
    assert len(stored_row(store, "", "big").encode()) < 1000
    assert store.storage_stats().continuation_rows == 0
    assert s.get_message("big") == msg


def test_extracts_media_nested_in_tool_output(store: Sessions) -> None:
    s = store.session()
    b64 = base64.b64encode(payload(200_000)).decode()
    msg = {
        "id": "tool",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-screenshot",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {},
                "output": {
                    "type": "content",
                    "content": [{"type": "media", "mediaType": "image/png", "data": b64}],
                },
            }
        ],
    }
    s.append_message(msg)
    st = store.storage_stats()
    assert (st.attachments, st.attachment_bytes) == (1, 200_000)
    assert b64 not in stored_row(store, "", "tool")
    assert s.get_message("tool") == msg


def test_charges_payload_bytes_to_the_read_budget(store: Sessions) -> None:
    s = store.session()
    s.append_message(image("img", payload(600_000)))
    (stat,) = s.get_history_row_stats()
    assert stat.bytes > 800_000  # 4 * ceil(600000 / 3) = 800000, plus the row


def test_media_heavy_runs_do_not_exceed_the_read_budget(store: Sessions) -> None:
    s = store.session()
    for i in range(8):
        s.append_message(image(f"i{i}", payload(400_000, seed=i)))
    recent = s.get_recent_history(1_500_000)
    assert 1 <= len(recent.messages) <= 3 and recent.truncated
    hydrated = sum(len(str(m).encode()) for m in recent.messages)
    assert hydrated < 1.1 * 1_500_000


def test_keeps_a_pointers_reference_when_the_message_is_written_back(store: Sessions) -> None:
    s = store.session()
    data = payload(30_000)
    s.append_message(image("img", data))
    pointer_form = image("img", data)
    digest = hashlib.sha256(data).hexdigest()
    pointer_form["parts"][1]["url"] = POINTER_PREFIX + digest
    pointer_form["parts"][0]["text"] = "edited caption"
    s.update_message(pointer_form)
    assert store.storage_stats().attachments == 1
    assert refs(store) == 1
    got = s.get_message("img")
    assert got is not None and got["parts"][1] == image("img", data)["parts"][1]
    # a new message pointing at the stored payload also keeps it alive
    other = {"id": "copy", "role": "user", "parts": [pointer_form["parts"][1]]}
    s.append_message(other)
    s.delete_messages(["img"])
    assert store.storage_stats().attachments == 1
    assert s.get_message("copy") == {"id": "copy", "role": "user",
                                     "parts": [image("img", data)["parts"][1]]}


def test_references_a_pointer_nested_inside_another_part(store: Sessions) -> None:
    s = store.session()
    data = payload(20_000)
    s.append_message(image("img", data))
    digest = hashlib.sha256(data).hexdigest()
    nested = {
        "id": "n",
        "role": "assistant",
        "parts": [{"type": "tool-x", "toolCallId": "c", "state": "output-available",
                   "input": {}, "output": {"items": [{"mediaType": "image/png",
                                                      "data": POINTER_PREFIX + digest}]}}],
    }
    s.append_message(nested)
    assert refs(store) == 2
    s.delete_messages(["img"])
    assert store.storage_stats().attachments == 1
    got = s.get_message("n")
    assert got is not None
    assert got["parts"][0]["output"]["items"][0]["data"] == base64.b64encode(data).decode()


def test_update_of_a_missing_message_stores_nothing(store: Sessions) -> None:
    s = store.session()
    s.append_message(image("img", payload(1000)))
    s.delete_messages(["img"])
    assert s.update_message(image("img", payload(2000, seed=3))) is None
    assert store.storage_stats().attachments == 0


def test_collects_a_payload_once_its_last_reference_goes(store: Sessions) -> None:
    s = store.session()
    data = payload(5_000)
    s.append_message(image("a", data))
    s.append_message(image("b", data))
    s.delete_messages(["a"])
    assert store.storage_stats().attachments == 1 and refs(store) == 1
    s.delete_messages(["b"])
    assert store.storage_stats().attachments == 0
    assert refs(store) == 0 and payload_chunks(store) == 0


def test_drops_payloads_a_message_stopped_referencing(store: Sessions) -> None:
    s = store.session()
    s.append_message(image("a", payload(5_000)))
    s.update_message(text("a", "no more image"))
    assert store.storage_stats().attachments == 0 and refs(store) == 0
    assert s.get_message("a") == text("a", "no more image")


def test_a_re_sent_identical_payload_is_an_unchanged_update(store: Sessions) -> None:
    s = store.session()
    msg = image("a", payload(5_000))
    s.append_message(msg)
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    assert s.update_message(msg) == msg
    assert events == []
    assert store.storage_stats().attachments == 1 and refs(store) == 1


def test_clears_every_payload_with_the_session(store: Sessions) -> None:
    s = store.session()
    for i in range(3):
        s.append_message(image(f"i{i}", payload(3_000, seed=i)))
    s.clear_messages()
    assert store.storage_stats().attachments == 0
    assert refs(store) == 0 and payload_chunks(store) == 0


def test_import_extracts_media_too(store: Sessions) -> None:
    s = store.session()
    msg = image("imp", payload(1_200_000))
    s.import_message(msg, parent_id=None, created_at=1)
    assert store.storage_stats().attachments == 1
    assert store.storage_stats().continuation_rows == 0
    assert s.get_message("imp") == msg


def test_declared_data_field_media_is_extracted(store: Sessions) -> None:
    s = store.session()
    b64 = base64.b64encode(payload(4_000)).decode()
    msg = {"id": "d", "role": "user", "parts": [{"type": "data-audio", "mediaType": "audio/wav",
                                                 "data": b64}]}
    s.append_message(msg)
    assert store.storage_stats().attachments == 1
    assert s.get_message("d") == msg


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,AAAA BBBB",  # whitespace: would not come back byte-identical
        "data:image/png;base64,QQ",  # unpadded
        "data:image/png;base64,QR==",  # stray bits before the padding decode like QQ==
        "data:image/png;base64,!!!!",  # not base64
    ],
)
def test_non_canonical_base64_stays_inline_so_reads_are_lossless(store: Sessions, url: str) -> None:
    s = store.session()
    msg = {"id": "x", "role": "user", "parts": [{"type": "file", "mediaType": "image/png",
                                                 "url": url}]}
    s.append_message(msg)
    assert s.get_message("x") == msg


@pytest.mark.requires("shared_across_processes")
def test_concurrent_writers_sharing_one_payload(store: Sessions) -> None:
    data = payload(100_000)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            s = store.session(f"s{k}")
            for i in range(5):
                s.append_message(image(f"m{i}", data))
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.storage_stats().attachments == 1
    assert refs(store) == 20
    assert store.session("s3").get_message("m4") == image("m4", data)


def test_a_delete_racing_an_append_of_the_same_payload(store: Sessions) -> None:
    data = payload(60_000)
    a, b = store.session("a"), store.session("b")
    errors: list[BaseException] = []

    def deleter() -> None:
        try:
            for i in range(15):
                a.append_message(image(f"x{i}", data))
                a.delete_messages([f"x{i}"])
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def appender() -> None:
        try:
            for i in range(15):
                b.append_message(image(f"y{i}", data))
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=deleter), threading.Thread(target=appender)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # no dangling pointer: every message of b reads back whole
    assert b.get_history() == [image(f"y{i}", data) for i in range(15)]
    assert store.storage_stats().attachments == 1
    b.clear_messages()
    assert store.storage_stats().attachments == 0  # no orphan either
    assert ids(a.get_history()) == []


# --- issue 18: the media type belongs to the message; clients cannot name payloads ------------


def file_part(data: bytes, media_type: str, *, declared: bool) -> dict[str, Any]:
    url = f"data:{media_type};base64,{base64.b64encode(data).decode()}"
    return {"type": "file", "mediaType": media_type, "url": url} if declared else {
        "type": "file", "url": url}


def test_a_data_url_reads_back_with_its_own_media_type_whoever_stored_the_bytes_first(
    store: Sessions,
) -> None:
    data = payload(3_000)
    first = {"id": "png", "role": "user",
             "parts": [file_part(data, "image/png", declared=False)]}
    store.session("a").append_message(first)
    b = store.session("b")
    later: list[dict[str, Any]] = [
        {"id": "pdf", "role": "user",
         "parts": [file_part(data, "application/pdf", declared=False)]},
        {"id": "both", "role": "user", "parts": [
            file_part(data, "image/jpeg", declared=False),
            file_part(data, "image/png;name=a.png", declared=False),
            file_part(data, "application/zip", declared=True),
            {"type": "data-x", "mediaType": "audio/wav", "data": base64.b64encode(data).decode()},
        ]},
    ]
    for m in later:
        assert b.append_message(m).message == m
    assert store.storage_stats().attachments == 1
    for m in later:
        assert b.get_message(m["id"]) == m
    assert b.get_history() == later
    assert list(b.history(newest_first=True)) == later[::-1]
    assert b.get_recent_history(10_000_000).messages == later
    store.session("a").delete_messages(["png"])
    assert b.get_history() == later
    assert store.session("a").get_history() == []


def test_an_updated_data_url_reads_back_with_its_new_media_type(store: Sessions) -> None:
    s = store.session()
    data = payload(2_000)
    s.append_message({"id": "m", "role": "user", "parts": [file_part(data, "image/png",
                                                                      declared=False)]})
    edited = {"id": "m", "role": "user", "parts": [file_part(data, "image/webp", declared=False)]}
    assert s.update_message(edited) == edited
    assert s.get_message("m") == edited


def victim_digest(store: Sessions) -> tuple[bytes, str]:
    data = payload(8_000, seed=7)
    store.session("victim").append_message(image("secret", data))
    return data, hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("where", ["url", "typed-url", "nested-data"])
def test_a_client_cannot_reference_another_sessions_payload(store: Sessions, where: str) -> None:
    _data, digest = victim_digest(store)
    pointer = POINTER_PREFIX + digest
    part: dict[str, Any]
    if where == "url":
        part, field = {"type": "file", "mediaType": "image/png", "url": pointer}, "parts[1].url"
    elif where == "typed-url":
        part, field = {"type": "file", "url": "data:image/png;base64," + pointer}, "parts[1].url"
    else:
        part = {"type": "tool-x", "toolCallId": "c", "state": "output-available", "input": {},
                "output": {"items": [{"mediaType": "image/png", "data": pointer}]}}
        field = "parts[1].output.items[0].data"
    msg = {"id": "steal", "role": "user", "parts": [{"type": "text", "text": "hi"}, part]}
    attacker = store.session("attacker")
    with pytest.raises(InvalidMessage) as info:
        attacker.append_message(msg, source="client")
    assert info.value.field == field
    with pytest.raises(InvalidMessage) as info:
        attacker.upsert_message(msg, source="client")
    assert info.value.field == field
    assert attacker.get_history() == []
    attacker.append_message(text("steal", "harmless"), source="client")
    with pytest.raises(InvalidMessage):
        attacker.update_message(msg, source="client")
    assert attacker.get_message("steal") == text("steal", "harmless")
    assert refs(store) == 1
    store.session("victim").delete_messages(["secret"])
    assert store.storage_stats().attachments == 0  # nothing of the attacker kept it alive


def test_a_client_may_write_pointer_like_text_and_its_own_media(store: Sessions) -> None:
    _data, digest = victim_digest(store)
    s = store.session("c")
    msg = image("own", payload(1_000, seed=2))
    msg["parts"][0]["text"] = "see attachment:sha256:" + digest
    assert s.append_message(msg, source="client").message == msg
    assert s.get_message("own") == msg
    assert s.update_message(msg, source="client") == msg


def test_codec_still_offers_every_public_attachment_name() -> None:
    # The attachment half of codec moved to convostore.attachments; `from convostore.codec
    # import X` must keep giving the same object for every name codec documented.
    import convostore.attachments as attachments
    import convostore.codec as codec

    assert attachments.__all__
    for name in attachments.__all__:
        assert getattr(codec, name) is getattr(attachments, name), name


@pytest.mark.parametrize("where", ["url", "typed-url", "nested-data"])
def test_an_import_cannot_borrow_another_sessions_payload(store: Sessions, where: str) -> None:
    """Issue 36, 6: an import (trusted as the server's) pointing at a payload only another
    session references, or at none, is refused naming the field, with nothing written; a
    pointer to a payload it brings or its session already references is taken."""
    data, digest = victim_digest(store)
    pointer = POINTER_PREFIX + digest
    missing = POINTER_PREFIX + "0" * 64
    part: dict[str, Any]
    if where == "url":
        part, field = {"type": "file", "mediaType": "image/png", "url": pointer}, "parts[1].url"
    elif where == "typed-url":
        part, field = {"type": "file", "url": "data:image/png;base64," + pointer}, "parts[1].url"
    else:
        part = {"type": "tool-x", "toolCallId": "c", "state": "output-available", "input": {},
                "output": {"items": [{"mediaType": "image/png", "data": pointer}]}}
        field = "parts[1].output.items[0].data"
    msg = {"id": "steal", "role": "user", "parts": [{"type": "text", "text": "hi"}, part]}
    attacker = store.session("attacker")
    with pytest.raises(InvalidMessage) as info:
        attacker.import_message(msg)
    assert info.value.field == field and "import the media itself" in info.value.problem
    with pytest.raises(InvalidMessage) as info:
        attacker.import_messages([text("ok", "fine"), msg])
    assert info.value.field == field
    ghost = {"id": "ghost", "role": "user", "parts": [
        {"type": "file", "mediaType": "image/png", "url": missing}]}
    with pytest.raises(InvalidMessage) as info:
        attacker.import_message(ghost)
    assert info.value.field == "parts[0].url"
    assert attacker.get_history() == [] and refs(store) == 1
    # brought along in the same batch: taken, and read back with its bytes
    own = image("own", data)
    assert [r.inserted for r in attacker.import_messages([own, msg])] == [True, True]
    got = attacker.get_message("steal")
    assert got is not None and got != msg  # the pointer reads back as the bytes
    # the session references it now: a later import may point at it
    msg2 = dict(msg, id="again")
    assert attacker.import_message(msg2).inserted
    store.session("victim").delete_messages(["secret"])
    assert store.storage_stats().attachments == 1  # the attacker's own references hold it
