"""Skills as files in a directory: :class:`DirectorySkillProvider`, with the rules a key must
follow to name a file inside that directory and nowhere else."""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable
from pathlib import Path

_FRONT = "---"
_FIELD_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")


def _split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(fields, body) of a document that may open with a ``---`` front-matter block."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != _FRONT:
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r") == _FRONT:
            fields: dict[str, str] = {}
            for line in lines[1:end]:
                match = _FIELD_RE.match(line.rstrip("\r"))
                if match:
                    value = match.group(2).strip()
                    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                        value = value[1:-1]
                    fields[match.group(1)] = value
            return fields, "\n".join(lines[end + 1 :])
    return {}, text


_NAME_MAX = 255
"""Most UTF-8 bytes of one file name (the common limit of ext4, APFS, NTFS and others)."""
_KEY_RULE = (
    "a key is a relative path of non-empty segments joined by '/', none starting with '.', "
    f"each at most {_NAME_MAX} bytes with the suffix, without '\\', NUL or control characters"
)


def _key_problem(key: object, suffix: str) -> str | None:
    """Why ``key`` cannot name a skill file (so it could never be read or written), or None."""
    if not isinstance(key, str) or not key:
        return "is not a non-empty string"
    if "\\" in key or any(unicodedata.category(c) == "Cc" for c in key):
        return "holds '\\' or a control character"
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate"
    segments = key.split("/")
    for i, segment in enumerate(segments):
        if not segment or segment.startswith("."):
            return "has an empty or hidden ('.'-prefixed) segment, or is absolute"
        if Path(segment).name != segment:  # a drive or root prefix where the OS reads one
            return "has a segment the file system reads as a path"
        name = segment + suffix if i == len(segments) - 1 else segment
        if len(name.encode("utf-8")) > _NAME_MAX:
            return "is too long"
    return None


class DirectorySkillProvider:
    """Skills as files in a directory: ``<path>/<key>.md``, loaded on demand.

    :param path: the directory (created by the first :meth:`set` if missing).
    :param keys: an allow-list of keys; ``None`` or empty exposes every file. A key outside it is
        not listed and loads as None without its file being read. :meth:`set` ignores it.
    :param suffix: the file name ending of a skill (``.md``).

    A key is the file's path relative to ``path`` without the suffix, with ``/`` between
    directories (``tools/git`` is ``tools/git.md``). A skill's description is the
    ``description:`` field of an optional front-matter block that opens the file::

        ---
        description: Talk like a pirate
        ---
        Arr! Always answer like a pirate.

    :meth:`load` returns the text after the front matter. The listing (:meth:`get`) has one
    line per skill, ``- key: description`` or ``- key``, sorted by key; it reads every exposed
    file. The methods are plain (blocking) file reads, also under :class:`AsyncContext`.

    Keys come from the model, so only files inside ``path`` are ever read or written: a key that
    could not name such a file (``../x``, ``/etc/x``, a hidden ``.x`` segment, NUL or another
    control character, a segment longer than 255 bytes) loads as None ("not found") and is
    refused by :meth:`set`; a file that resolves outside ``path`` (a symlink out of it) is
    neither listed nor loaded. Errors name the key, never the directory's path, since tool
    replies show them to the model.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        keys: Iterable[str] | None = None,
        *,
        suffix: str = ".md",
    ) -> None:
        if isinstance(keys, str):
            raise TypeError("keys must be a list of keys, not a string")
        if not isinstance(suffix, str) or not suffix:
            raise TypeError("suffix must be a non-empty string")
        if any(c in suffix for c in "/\\\x00"):
            raise ValueError(f"suffix {suffix!r} must not hold '/', '\\' or NUL")
        self.path = Path(path)
        """The directory holding the skill files."""
        self.keys: frozenset[str] | None = frozenset(keys) if keys else None
        """The allow-list, or None when every file is exposed."""
        self.suffix = suffix
        """The file name ending of a skill."""

    def __repr__(self) -> str:
        return f"<DirectorySkillProvider {str(self.path)!r}>"

    def _allowed(self, key: str) -> bool:
        return self.keys is None or (isinstance(key, str) and key in self.keys)

    def _file(self, key: str) -> Path | None:
        """The file of ``key``, or None for a key that could not name a file inside the path."""
        if _key_problem(key, self.suffix) is not None:
            return None
        segments = key.split("/")
        return self.path.joinpath(*segments[:-1], segments[-1] + self.suffix)

    def _inside(self, file: Path) -> bool:
        """Whether ``file``, symlinks followed, stays inside the directory."""
        try:
            return file.resolve().is_relative_to(self.path.resolve())
        except (OSError, RuntimeError):  # a symlink loop
            return False

    def _existing(self, key: str) -> Path | None:
        """The readable file of ``key`` inside the directory, or None ("not found")."""
        file = self._file(key)
        try:
            if file is None or not file.is_file():
                return None
        except OSError:  # e.g. a path longer than the OS allows: no such skill
            return None
        return file if self._inside(file) else None

    def _read(self, file: Path) -> str:
        return file.read_text(encoding="utf-8")

    def _text(self, key: str, file: Path) -> str:
        """The file's text; a failure names the key, not the server's path."""
        try:
            return self._read(file)
        except OSError as exc:
            raise OSError(exc.errno, f"skill {key!r} cannot be read: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"skill {key!r} is not UTF-8 text") from exc

    def _listed_keys(self) -> list[str]:
        if not self.path.is_dir():
            return []
        found = []
        for file in self.path.rglob("*" + self.suffix):
            key = file.relative_to(self.path).as_posix()[: -len(self.suffix)]
            if self._allowed(key) and self._existing(key) is not None:
                found.append(key)
        return sorted(found)

    def get(self) -> str | None:
        """The listing of the exposed skills, or None when there are none."""
        lines = []
        for key in self._listed_keys():
            file = self._existing(key)
            if file is None:  # removed since it was listed
                continue
            fields, _body = _split_front_matter(self._text(key, file))
            description = fields.get("description")
            lines.append(f"- {key}: {description}" if description else f"- {key}")
        return "\n".join(lines) if lines else None

    def load(self, key: str) -> str | None:
        """The skill's text without its front matter; None if absent or not allowed."""
        if not self._allowed(key):
            return None
        file = self._existing(key)
        if file is None:
            return None
        _fields, body = _split_front_matter(self._text(key, file))
        return body

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Write the skill ``key`` (atomically), with ``description`` in its front matter.

        :raises ValueError: for a key that could not name a file inside the directory (see the
            class docstring), or whose directory resolves outside it.
        :raises OSError: when the file system refuses the write; the message names the key.
        """
        if not isinstance(content, str):
            raise TypeError(f"content must be a string, not {type(content).__name__}")
        if not isinstance(key, str):
            raise TypeError(f"a skill key must be a string, not {type(key).__name__}")
        problem = _key_problem(key, self.suffix)
        if problem is not None:
            raise ValueError(f"invalid skill key {key!r}: it {problem} ({_KEY_RULE})")
        file = self._file(key)
        assert file is not None
        if not self._inside(file.parent):
            raise ValueError(f"invalid skill key {key!r}: its directory is outside the skills")
        if description:
            one_line = " ".join(str(description).split())
            text = f"{_FRONT}\ndescription: {one_line}\n{_FRONT}\n{content}"
        elif content.split("\n", 1)[0].rstrip("\r") == _FRONT:
            # Content that itself opens like front matter gets an empty block, so it reads back.
            text = f"{_FRONT}\n{_FRONT}\n{content}"
        else:
            text = content
        try:
            self._write(file, text)
        except OSError as exc:
            raise OSError(exc.errno, f"skill {key!r} cannot be written: {exc.strerror}") from exc

    def _write(self, file: Path, text: str) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-", suffix=self.suffix)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.replace(tmp, file)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
