"""Token estimates: strings, values, messages, attachments and row stamps."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from convostore.tokens import (
    IMAGE_ATTACHMENT_TOKENS,
    MAX_ATTACHMENT_TOKENS,
    TOKENS_PER_MESSAGE,
    estimate_attachment_tokens,
    estimate_message_tokens,
    estimate_row_tokens,
    estimate_string_tokens,
    estimate_value_tokens,
)


def text_message(text: str, role: str = "user") -> dict[str, Any]:
    return {"id": "m", "role": role, "parts": [{"type": "text", "text": text}]}


# ── estimate_string_tokens ───────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 2),  # 1 char -> 0.25, 1 word -> 1.3
        ("abcd", 2),  # 4 chars -> 1.0, 1 word -> 1.3
        ("Hello world", 3),  # 11/4 = 2.75 beats 2 * 1.3 = 2.6
        ("a" * 401, 101),  # ceil(100.25)
        ("a" * 400, 100),  # exactly 100: no rounding up
        ("one two three four five", 7),  # 5 words -> 6.5 beats 23/4
        ("a b c d e f g h i j", 13),  # 10 * 1.3 = 13.0 exactly
        ("a b c", 4),  # 3 * 1.3 = 3.9...
        ("a\tb\nc", 4),  # any whitespace run splits words
        ("   ", 1),  # no words, 3 chars -> 0.75
        ("  lead  and   trail  ", 6),  # 21 chars -> 5.25; 3 words -> 3.9
    ],
)
def test_string_rule(text: str, expected: int) -> None:
    assert estimate_string_tokens(text) == expected


def test_string_length_is_counted_in_utf16_code_units() -> None:
    # U+1F600 is two UTF-16 code units: 8 emoji = 16 units = 4 tokens (not 8 chars = 2).
    assert estimate_string_tokens("\U0001f600" * 8) == 4
    assert estimate_string_tokens("\U0001f600" * 400) == 200
    # BMP characters outside ASCII count one unit each.
    assert estimate_string_tokens("é" * 8) == 2
    assert estimate_string_tokens("日本語のテキスト" * 50) == 100
    # A lone surrogate counts one unit, like JavaScript's .length.
    assert estimate_string_tokens("\ud800" * 8) == 2
    assert estimate_string_tokens("\udc00" * 40) == 10


def test_string_rule_on_a_large_string() -> None:
    text = "word " * 200_000  # 1,000,000 chars, 200,000 words -> 260,000 beats 250,000
    assert estimate_string_tokens(text) == 260_000
    assert estimate_string_tokens("x" * 4_000_001) == 1_000_001


# ── estimate_value_tokens ────────────────────────────────────────────────────────────────────


def test_value_rule() -> None:
    assert estimate_value_tokens(None) == 0
    assert estimate_value_tokens("") == 0
    assert estimate_value_tokens("abcd" * 10) == 10
    assert estimate_value_tokens({"a": 1}) == 2  # '{"a":1}' is 7 chars
    assert estimate_value_tokens([1, 2, 3]) == 2  # '[1,2,3]'
    # Short values: one "word" costs 1.3, so at least 2 tokens.
    assert estimate_value_tokens(True) == 2  # 'true'
    assert estimate_value_tokens(0) == 2  # '0'
    assert estimate_value_tokens({}) == 2  # '{}'
    # Compact separators: '{"a":1,"b":[1,2]}' is 17 chars (with spaces it would be 23).
    assert estimate_value_tokens({"a": 1, "b": [1, 2]}) == 5
    # Non-ASCII stays as is (ensure_ascii=False): 6 + 40 + 2 = 48 chars, not 248.
    assert estimate_value_tokens({"k": "é" * 40}) == 12


def test_value_rule_falls_back_to_str() -> None:
    # A set is not JSON: str({1, 2}) == "{1, 2}" -> 6 chars, 2 words -> 2.6 -> 3.
    assert estimate_value_tokens({1, 2}) == 3
    assert estimate_value_tokens(b"abcdefgh") == 3  # "b'abcdefgh'" is 11 chars


def test_value_rule_with_a_token_counter() -> None:
    seen: list[str] = []

    def counter(text: str) -> int:
        seen.append(text)
        return len(text)

    assert estimate_value_tokens({"a": 1}, counter) == 7
    assert estimate_value_tokens("hello", counter) == 5
    assert estimate_value_tokens(None, counter) == 0
    assert seen == ['{"a":1}', "hello"]


# ── estimate_message_tokens ──────────────────────────────────────────────────────────────────


def test_framing_per_message() -> None:
    assert TOKENS_PER_MESSAGE == 4
    assert estimate_message_tokens([]) == 0
    assert estimate_message_tokens([{"id": "m", "role": "user", "parts": []}]) == 4
    assert estimate_message_tokens([{"id": "m", "role": "user"}]) == 4
    assert estimate_message_tokens([text_message("Hello world")] * 3) == 21


def test_text_and_reasoning_parts() -> None:
    reasoning = {"type": "reasoning", "reasoning": "abcd" * 2}
    assert estimate_message_tokens([{"role": "assistant", "parts": [reasoning]}]) == 6
    text_wins = {"type": "reasoning", "text": "abcd", "reasoning": "abcd" * 10}
    assert estimate_message_tokens([{"role": "assistant", "parts": [text_wins]}]) == 6
    none_text = {"type": "text", "text": None, "reasoning": "abcd" * 3}
    assert estimate_message_tokens([{"role": "assistant", "parts": [none_text]}]) == 7
    two = [{"type": "text", "text": "abcd"}, {"type": "text", "text": "a" * 40}]
    assert estimate_message_tokens([{"role": "user", "parts": two}]) == 4 + 2 + 10


def test_tool_parts_count_input_and_output() -> None:
    tool = {
        "type": "tool-read",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {"path": "/a"},  # '{"path":"/a"}' = 13 chars -> 4
        "output": "x" * 400,  # 100
    }
    assert estimate_message_tokens([{"role": "assistant", "parts": [tool]}]) == 4 + 4 + 100
    dynamic = {**tool, "type": "dynamic-tool", "toolName": "read"}
    assert estimate_message_tokens([{"role": "assistant", "parts": [dynamic]}]) == 108
    # output None (or absent) falls back to result.
    legacy = {"type": "tool-read", "input": {"path": "/a"}, "output": None, "result": "abcd"}
    assert estimate_message_tokens([{"role": "assistant", "parts": [legacy]}]) == 4 + 4 + 2
    no_output = {"type": "tool-read", "input": {"path": "/a"}, "result": [1, 2, 3]}
    assert estimate_message_tokens([{"role": "assistant", "parts": [no_output]}]) == 4 + 4 + 2
    # An object output is counted through its compact JSON.
    structured = {"type": "tool-read", "input": None, "output": {"content": "y" * 392}}
    # '{"content":"' + 392 + '"}' = 12 + 392 + 2 = 406 chars -> 102
    assert estimate_message_tokens([{"role": "assistant", "parts": [structured]}]) == 4 + 102


def test_other_parts() -> None:
    file_part = {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AAAA"}
    assert estimate_message_tokens([{"role": "user", "parts": [file_part]}]) == 4
    data_text = {"type": "data-note", "text": "abcd" * 5}
    assert estimate_message_tokens([{"role": "user", "parts": [data_text]}]) == 9
    with_result = {"type": "source-url", "result": [1, 2, 3]}
    assert estimate_message_tokens([{"role": "user", "parts": [with_result]}]) == 6
    # A present text key wins over result, even when it is None.
    null_text = {"type": "x", "text": None, "result": "abcd" * 10}
    assert estimate_message_tokens([{"role": "user", "parts": [null_text]}]) == 4
    step = {"type": "step-start"}
    assert estimate_message_tokens([{"role": "assistant", "parts": [step]}]) == 4


def test_metadata_is_not_counted() -> None:
    message = {**text_message("Hello world"), "metadata": {"big": "z" * 10_000}}
    assert estimate_message_tokens([message]) == 7


def test_message_tokens_accepts_any_iterable() -> None:
    assert estimate_message_tokens(text_message("abcd") for _ in range(3)) == 18


def test_message_tokens_with_a_token_counter() -> None:
    tool = {"type": "tool-read", "input": {"path": "/a"}, "output": "x" * 400}
    messages: list[dict[str, Any]] = [
        text_message("Hello world"),
        {"role": "assistant", "parts": [tool]},
    ]
    assert estimate_message_tokens(messages, len) == (4 + 11) + (4 + 13 + 400)
    assert estimate_message_tokens(messages, lambda s: 1) == (4 + 1) + (4 + 1 + 1)


# ── estimate_attachment_tokens ───────────────────────────────────────────────────────────────


def test_attachment_rule() -> None:
    assert IMAGE_ATTACHMENT_TOKENS == 1_600
    assert MAX_ATTACHMENT_TOKENS == 20_000
    assert estimate_attachment_tokens("image/png", 10**9) == 1_600
    assert estimate_attachment_tokens("image/jpeg", 0) == 1_600
    assert estimate_attachment_tokens("application/pdf", 0) == 0
    assert estimate_attachment_tokens("application/pdf", 1) == 1
    assert estimate_attachment_tokens("application/pdf", 10) == 3
    assert estimate_attachment_tokens("text/plain", 79_996) == 19_999
    assert estimate_attachment_tokens("text/plain", 79_999) == 20_000
    assert estimate_attachment_tokens("text/plain", 80_004) == 20_000
    assert estimate_attachment_tokens("application/octet-stream", 10**9) == 20_000
    assert estimate_attachment_tokens("IMAGE/PNG", 8) == 2  # the prefix is case-sensitive


# ── estimate_row_tokens ──────────────────────────────────────────────────────────────────────


def file_message(url: object, media_type: str | None = None) -> dict[str, Any]:
    part: dict[str, object] = {"type": "file", "url": url}
    if media_type is not None:
        part["mediaType"] = media_type
    return {"id": "f", "role": "user", "parts": [{"type": "text", "text": "Hello world"}, part]}


def test_row_stamp_adds_inline_attachments() -> None:
    image = file_message("data:image/png;base64," + "A" * 40_000, "image/png")
    assert estimate_row_tokens(image) == 7 + 1_600
    pdf = file_message("data:application/pdf;base64," + "A" * 4_000, "application/pdf")
    assert estimate_row_tokens(pdf) == 7 + 750  # 4000 * 3 / 4 = 3000 bytes
    odd = file_message("data:application/pdf;base64," + "A" * 4_002, "application/pdf")
    assert estimate_row_tokens(odd) == 7 + 751  # floor(3001.5) = 3001 bytes -> 751
    plain = file_message("data:text/plain,hello%20world", "text/plain")
    assert estimate_row_tokens(plain) == 7 + 4  # 13 payload chars
    comma = file_message("data:text/plain,a,b", "text/plain")
    assert estimate_row_tokens(comma) == 7 + 1  # payload "a,b" starts after the first comma
    big = file_message("data:application/zip;base64," + "A" * 1_000_000, "application/zip")
    assert estimate_row_tokens(big) == 7 + 20_000


def test_row_stamp_media_type_defaults_to_octet_stream() -> None:
    assert estimate_row_tokens(file_message("data:;base64," + "A" * 80)) == 7 + 15  # 60 bytes
    # Without a mediaType an image data URL is not recognised as an image.
    assert estimate_row_tokens(file_message("data:image/png;base64," + "A" * 80)) == 7 + 15


def test_row_stamp_ignores_what_is_not_an_inline_file() -> None:
    assert estimate_row_tokens(file_message("https://example.com/a.png", "image/png")) == 7
    assert estimate_row_tokens(file_message(None, "image/png")) == 7
    assert estimate_row_tokens(file_message("data:image/png", "image/png")) == 7 + 1_600
    assert estimate_row_tokens(file_message("data:text/plain", "text/plain")) == 7 + 0
    not_file = {"role": "user", "parts": [{"type": "x", "url": "data:text/plain,abcdabcd"}]}
    assert estimate_row_tokens(not_file) == 4


def test_row_stamp_counts_nested_media_through_json() -> None:
    output = {"type": "file", "url": "data:image/png;base64," + "A" * 4000}
    tool = {"type": "tool-shot", "input": None, "output": output}
    message = {"id": "t", "role": "assistant", "parts": [tool]}
    expected_json = '{"type":"file","url":"data:image/png;base64,' + "A" * 4000 + '"}'
    assert estimate_row_tokens(message) == 4 + math.ceil(len(expected_json) / 4)
    assert json.dumps(output, separators=(",", ":")) == expected_json


def test_row_stamp_with_a_token_counter() -> None:
    image = file_message("data:image/png;base64,AAAA", "image/png")
    assert estimate_row_tokens(image, len) == 4 + 11 + 1_600
    assert estimate_row_tokens(text_message("abcd")) == estimate_message_tokens(
        [text_message("abcd")]
    )


def test_string_estimate_agrees_with_the_formula_on_random_ascii() -> None:
    """The whitespace-count shortcut never changes the result of ceil(max(len/4, words*1.3))."""
    import random

    rng = random.Random(7)
    alphabet = 'ab   \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f{}":,xyz'
    for _ in range(5000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
        expected = math.ceil(max(len(s) / 4, len(s.split()) * 1.3))
        assert estimate_string_tokens(s) == expected, repr(s)


def test_json_text_shortcut_agrees_with_the_formula_on_random_values() -> None:
    """Tool values are counted through their JSON text by a space-only shortcut; it must give
    what the formula gives, whatever whitespace and control characters the values hold."""
    import json
    import random

    from convostore.tokens import _json_text_tokens

    rng = random.Random(3)
    alphabet = 'ab  \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x00"\\{}:,xyz\u00e9\u3000\u2028'

    def word() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))

    def value(depth: int) -> object:
        kind = rng.randint(0, 5 if depth < 3 else 2)
        if kind == 0:
            return word()
        if kind == 1:
            return rng.randint(-5, 10**6)
        if kind == 2:
            return None
        if kind == 3:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {word(): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(3000):
        text = json.dumps(value(0), separators=(",", ":"), ensure_ascii=False)
        units = len(text.encode("utf-16-le", "surrogatepass")) // 2
        expected = math.ceil(max(units / 4, len(text.split()) * 1.3))
        assert _json_text_tokens(text) == expected, text
        parsed = json.loads(text)
        if isinstance(parsed, (dict, list)):
            assert estimate_value_tokens(parsed) == expected, text


def test_a_lone_surrogate_counts_as_its_escape_on_every_encoding_path() -> None:
    """The row stamp (texts made while storing) and the public estimate agree: both count a
    lone surrogate as the six characters of ``\\udXXX``, as the stored JSON holds it."""
    from convostore import codec

    output = {"s": "\ud800" * 40}
    message = {"id": "x", "role": "assistant", "parts": [
        {"type": "tool-t", "toolCallId": "c", "input": {}, "output": output}]}
    _text, encoded = codec.dumps_message(message)
    stored_text = json.dumps(output, separators=(",", ":"))  # ASCII: the surrogates escaped
    assert len(stored_text) == 8 + 6 * 40
    assert estimate_row_tokens(message) == estimate_row_tokens(message, None, encoded)
    assert estimate_value_tokens(output) == math.ceil(len(stored_text) / 4)


@pytest.mark.parametrize("size", [0, 10, 1000, 5000])
def test_the_row_stamp_and_text_are_the_same_whatever_the_tool_values_size(size: int) -> None:
    """Small tool values are encoded again with the message, large ones once around it: the
    stored text and the stamped estimate are the same on both paths."""
    from convostore import codec

    big = {"rows": ["w é " * 3 for _ in range(size // 10)], "n": size}
    message = {"id": "t", "role": "assistant", "metadata": {"k": [1, {"a": None}]}, "parts": [
        {"type": "step-start"},
        {"type": "tool-read", "toolCallId": "c1", "input": {"path": "/src"}, "output": big},
        {"type": "dynamic-tool", "toolName": "x", "toolCallId": "c2", "input": [size],
         "output": "a string output " * size},
        {"type": "text", "text": "done"},
    ]}
    text, encoded = codec.dumps_message(message)
    assert text == codec.dumps(message)
    assert estimate_row_tokens(message, None, encoded) == estimate_row_tokens(message)
