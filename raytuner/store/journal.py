"""The JSON store's journal: one JSON line per append, and the quarantine for lines that cannot be read.

A journal line is ``{"kind": "func_eval" | "surrogate_model", "record": {...}}``,
or ``{"kind": "batch", "entries": [<such objects>...]}`` for records written
together (an import, a bulk append): a line is written whole or, after a crash
mid-write, torn, so a batch is all or nothing.

A line that cannot be read (a torn write, a flipped byte) is never dropped:
readers skip it with a warning, and the writer that compacts the journal first
copies it whole to the quarantine file ``<problem>.json.corrupt`` beside the
store, as one JSON line with its byte offset in the journal.

Example:
    >>> line = encode_entries([("func_eval", {"uid": "a"}), ("surrogate_model", {"uid": "m"})])
    >>> line.endswith(b"\\n"), [kind for kind, _ in decode_line(line[:-1])]
    (True, ['func_eval', 'surrogate_model'])
    >>> decode_line(b'{"kind": "func_eval", "rec')
    Traceback (most recent call last):
    ...
    ValueError: not JSON (Unterminated string starting at: line 1 column 23 (char 22))
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.store.jsontext import dumps_standard, loads_stored

__all__ = [
    "FUNC_EVAL",
    "SURROGATE_MODEL",
    "Journal",
    "BadLine",
    "encode_entries",
    "decode_line",
    "read_journal",
    "quarantine",
    "fsync_dir",
]

FUNC_EVAL = "func_eval"
SURROGATE_MODEL = "surrogate_model"
_BATCH = "batch"
_MODELS: dict[str, Any] = {FUNC_EVAL: FunctionEvaluation, SURROGATE_MODEL: SurrogateModelRecord}

Entry = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class BadLine:
    """A journal line that cannot be read: where it starts, its bytes, and why."""

    offset: int
    data: bytes
    reason: str


@dataclass
class Journal:
    """What a journal holds: its readable entries, its unreadable lines, and a torn last piece.

    ``tail`` is the bytes after the last newline: a write in progress for a
    reader, a torn write for the writer that holds the exclusive lock. ``end``
    is the byte offset just after the last whole line (where a later read of
    what was appended since starts), ``inode`` the file's (``None``: no file).
    """

    entries: list[Entry]
    bad: list[BadLine]
    tail: BadLine | None = None
    end: int = 0
    inode: int | None = None


def encode_entries(entries: Iterable[Entry]) -> bytes:
    """One journal line (with its newline) holding ``entries``; a batch when there are several.

    Args:
        entries: ``(kind, record dict)`` pairs.

    Raises:
        TypeError, ValueError: when a record is not JSON data.
    """
    items = [{"kind": kind, "record": record} for kind, record in entries]
    obj = items[0] if len(items) == 1 else {"kind": _BATCH, "entries": items}
    return dumps_standard(obj).encode() + b"\n"


def _entry(obj: Any) -> Entry:
    if not isinstance(obj, dict):
        raise ValueError("not a journal entry object")
    kind = obj.get("kind")
    record = obj.get("record")
    if kind not in _MODELS:
        raise ValueError(f"unknown kind {kind!r}")
    if not isinstance(record, dict):
        raise ValueError("its record is not an object")
    try:
        _MODELS[kind].model_validate(record)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise ValueError(f"not a valid {kind} record ({'.'.join(map(str, first['loc']))}: {first['msg']})") from None
    return kind, record


def decode_line(line: bytes) -> list[Entry]:
    """The entries of one journal line (without its newline).

    Args:
        line: the line's bytes, without its newline.

    Raises:
        ValueError: naming why the line cannot be read (also for JSON nested deeper than Python can read).
    """
    try:
        obj = loads_stored(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    except RecursionError:  # nested deeper than the interpreter's stack: damage, not a record
        raise ValueError("not usable JSON (nested too deeply)") from None
    try:
        if isinstance(obj, dict) and obj.get("kind") == _BATCH:
            items = obj.get("entries")
            if not isinstance(items, list):
                raise ValueError("a batch without a list of entries")
            return [_entry(item) for item in items]
        return [_entry(obj)]
    except RecursionError:
        raise ValueError("not a usable record (nested too deeply)") from None


def read_journal(path: Path, start: int = 0) -> Journal:
    """Read a journal file from byte ``start`` (default: whole); a missing file is an empty journal.

    Args:
        path: The ``<problem>.json.journal`` file.
        start: Where to begin: 0, or a :attr:`Journal.end` of an earlier read of the same file (the lines
            appended since).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "p.json.journal"
    >>> _ = path.write_bytes(encode_entries([("func_eval", {"uid": "a"})]))
    >>> first = read_journal(path)
    >>> with open(path, "ab") as fh:
    ...     _ = fh.write(encode_entries([("func_eval", {"uid": "b"})]) + b'{"kind": "fu')
    >>> later = read_journal(path, first.end)
    >>> [record["uid"] for _, record in later.entries], later.tail.offset == later.end
    (['b'], True)
    """
    try:
        with open(path, "rb") as fh:
            inode = os.fstat(fh.fileno()).st_ino
            fh.seek(start)
            raw = fh.read()
    except FileNotFoundError:
        return Journal([], [], end=start)
    entries: list[Entry] = []
    bad: list[BadLine] = []
    offset = start
    end = raw.rfind(b"\n") + 1
    for line in raw[:end].split(b"\n")[:-1]:
        if line.strip():
            try:
                entries.extend(decode_line(line))
            except ValueError as exc:
                bad.append(BadLine(offset, line, str(exc)))
        offset += len(line) + 1
    tail = BadLine(start + end, raw[end:], "torn write: no newline at the end") if raw[end:].strip() else None
    return Journal(entries, bad, tail, start + end, inode)


def fsync_dir(path: Path) -> None:
    """fsync a directory, so that a file created or renamed in it survives a crash.

    Args:
        path: the directory.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _quarantine_line(journal: Path, line: BadLine) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "file": journal.name,
        "offset": line.offset,
        "reason": line.reason,
        "quarantined": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    try:
        entry["line"] = line.data.decode("utf-8")
    except UnicodeDecodeError:
        entry["line_base64"] = base64.b64encode(line.data).decode("ascii")
    return entry


def quarantine(target: Path, journal: Path, lines: list[BadLine]) -> None:
    """Append ``lines`` of ``journal`` to the quarantine file ``target``, durably.

    Each line becomes one JSON object: the name of the file it was in (``file``), its byte offset, the
    reason, and the line itself (``line``, or ``line_base64`` when it is not
    UTF-8). Lines already quarantined from the same offset with the same bytes
    (a compaction interrupted after this step) are not written twice.

    Args:
        target: The ``<problem>.json.corrupt`` file.
        journal: The journal the lines come from.
        lines: The unreadable lines.
    """
    done: set[tuple[int, str]] = set()
    try:
        with open(target, encoding="utf-8") as fh:
            for text in fh:
                try:
                    old = json.loads(text)
                    done.add((old["offset"], old.get("line") or old.get("line_base64")))
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue
    except FileNotFoundError:
        pass
    fresh = [
        entry
        for entry in (_quarantine_line(journal, line) for line in lines)
        if (entry["offset"], entry.get("line") or entry.get("line_base64")) not in done
    ]
    if not fresh:
        return
    created = not target.exists()
    with open(target, "a", encoding="utf-8") as fh:
        for entry in fresh:
            fh.write(json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        fsync_dir(target.parent)
