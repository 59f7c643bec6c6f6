"""Attachments: payloads out of line, by hash.

Inline media is moved out of a message when it is written (:func:`extract_attachments`), stored
once per SHA-256, and put back when the message is read (:func:`resolve_attachments`).
"""

from ._payloads import (
    MAX_ATTACHMENT_DEPTH,
    POINTER_PREFIX,
    Payload,
    base64_len,
    extract_attachments,
    is_pointer,
    may_carry_media,
    pointer_field,
    pointer_for,
    pointer_hashes,
    resolve_attachments,
)

__all__ = [
    "MAX_ATTACHMENT_DEPTH",
    "POINTER_PREFIX",
    "Payload",
    "base64_len",
    "extract_attachments",
    "is_pointer",
    "may_carry_media",
    "pointer_field",
    "pointer_for",
    "pointer_hashes",
    "resolve_attachments",
]
