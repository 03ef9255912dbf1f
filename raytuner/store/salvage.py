"""What is intact of a damaged GPTune history file, and where the damage is.

:func:`raytuner.store.gptune_file.write_history_file` (every compaction of a
JSON store) writes one record per line, so a damaged file (a flipped byte,
bytes that are not UTF-8, NUL bytes, a torn end) is read line by line: every
line that is a whole record of its list is kept, every other line that is
not the file's own structure is a damaged span, with its byte offset, for the
store to report and to keep in ``<problem>.json.corrupt``
(:func:`raytuner.store.journal.quarantine`).

Example:
    >>> raw = (b'{"tuning_problem_name": "p", "surrogate_model": [], "func_eval": [\\n'
    ...        b'{"uid": "a"},\\n{"uid": \\x00\\x00},\\n{"uid": "c"}\\n]}\\n')
    >>> found = salvage_history(raw, check=lambda kind, record: kind)
    >>> [r["uid"] for r in found.data["func_eval"]], [(b.offset, b.data) for b in found.bad]
    (['a', 'c'], [(81, b'{"uid": \\x00\\x00},')])
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.store.journal import FUNC_EVAL, SURROGATE_MODEL, BadLine
from raytuner.store.jsontext import loads_stored

__all__ = ["Salvage", "drop_invalid_records", "read_store_file", "record_kind", "salvage_history"]

_MARKER = re.compile(rb'"(func_eval|surrogate_model)"\s*:\s*\[(\s*\])?')
_STRUCTURE = re.compile(rb"^[\s\[\]{},]*$")
_MODELS: dict[str, Any] = {FUNC_EVAL: FunctionEvaluation, SURROGATE_MODEL: SurrogateModelRecord}


@dataclass
class Salvage:
    """A history file's intact part (``data``: a GPTune object), its damaged lines (``bad``), whether every
    record was validated (``checked``)."""

    data: Any
    bad: list[BadLine]
    checked: bool = True


def record_kind(section: str | None, record: dict[str, Any]) -> str | None:
    """The list a salvaged record belongs to: its section's when it is a valid record of it, else the other's.

    ``None`` when it is a valid record of neither (a damaged record).

    Args:
        section: The list the record's line is in (``None``: not known, its header line was damaged).
        record: The record's JSON object.
    """
    order = [section] if section else []
    order += [kind for kind in _MODELS if kind != section]
    for kind in order:
        try:
            _MODELS[kind].model_validate(record)
        except ValidationError:
            continue
        return kind
    return None


def _header(head: bytes) -> dict[str, Any] | None:
    """The header fields written before the first list (``{"tuning_problem_name": ..., ``), or ``None``."""
    text = head.strip().rstrip(b", \t")
    if text == b"{":
        return {}
    try:
        value = loads_stored(text + b"}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _record(text: bytes) -> dict[str, Any] | None:
    try:
        value = loads_stored(text[:-1] if text.endswith(b",") else text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def salvage_history(raw: bytes, check: Callable[[str | None, dict[str, Any]], str | None] = record_kind) -> Salvage:
    """Read the intact records of a history file's bytes line by line (see the module documentation).

    Args:
        raw: The file's bytes.
        check: Which list a record goes to (:func:`record_kind`), ``None`` for a damaged record.
    """
    data: dict[str, Any] = {SURROGATE_MODEL: [], FUNC_EVAL: []}
    bad: list[BadLine] = []
    section: str | None = None
    offset = 0
    for line in raw.split(b"\n"):
        start, offset = offset, offset + len(line) + 1
        text = line.strip()
        if not text:
            continue
        if text.startswith(b"{") and text.endswith((b"}", b"},")):
            record = _record(text)
            kind = check(section, record) if record is not None else None
            if kind is not None:
                data[kind].append(record)
                continue
        markers = list(_MARKER.finditer(text))
        if markers:
            head = text[: markers[0].start()]
            header = _header(head) if head.lstrip().startswith(b"{") else ({} if _STRUCTURE.match(head) else None)
            if header is not None and _STRUCTURE.match(text[markers[-1].end() :]):
                data.update({k: v for k, v in header.items() if k not in (FUNC_EVAL, SURROGATE_MODEL)})
                section = None if markers[-1].group(2) else markers[-1].group(1).decode()
                continue
        elif _STRUCTURE.match(text):
            if b"]" in text:
                section = None
            continue
        bad.append(
            BadLine(
                start,
                line,
                "not a whole record of the file" if text.startswith(b"{") else "a damaged line of the file's structure",
            )
        )
    return Salvage(data, bad)


def read_store_file(raw: bytes) -> Salvage:
    """A store's GPTune file: parsed whole when it is JSON whose records are objects, else line by line.

    Read line by line, ``bad`` lists the damaged lines; a file that is cut
    short after a whole line (no closing brackets), or emptied, is one damaged
    line of no bytes at its end.

    Args:
        raw: The file's bytes.

    >>> read_store_file(b'{"func_eval": [{"uid": "a"}]}').bad
    []
    >>> [(b.offset, b.reason) for b in read_store_file(b'{"func_eval": [').bad]
    [(15, 'the file ends early (torn)')]
    >>> [(b.offset, b.reason) for b in read_store_file(b'').bad]
    [(0, 'the file is empty')]
    """
    try:
        data = loads_stored(raw)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, torn
        data = None
    if isinstance(data, dict) and all(
        isinstance(r, dict) for k in (FUNC_EVAL, SURROGATE_MODEL) if isinstance(data.get(k), list) for r in data[k]
    ):
        return Salvage(data, [], checked=False)
    salvaged = salvage_history(raw)
    if not salvaged.bad:
        why = "the file is empty" if not raw.strip() else "the file ends early (torn)"
        salvaged.bad.append(BadLine(len(raw), b"", why))
    return salvaged


def drop_invalid_records(data: dict[str, Any], raw: bytes) -> list[BadLine]:
    """Remove from ``data`` (a GPTune object read from ``raw``) the records that are not valid records of their list.

    Returns them as damaged lines: the offset is where the record's text is in
    ``raw`` (-1 when it is not written there as raytuner writes a record).

    Args:
        data: The parsed file (today's schema); changed in place.
        raw: The file's bytes.

    >>> data = {"func_eval": [[], {"uid": "a"}]}
    >>> [(b.offset, b.data) for b in drop_invalid_records(data, b'{"func_eval": [[], {"uid": "a"}]}')], data
    ([(15, b'[]')], {'func_eval': [{'uid': 'a'}]})
    """
    bad: list[BadLine] = []
    for kind in (k for k in (FUNC_EVAL, SURROGATE_MODEL) if isinstance(data.get(k), list)):
        keep = []
        for index, record in enumerate(data[kind]):
            if isinstance(record, dict) and record_kind(kind, record) == kind:
                keep.append(record)
                continue
            text = json.dumps(record).encode()
            bad.append(BadLine(raw.find(text), text, f"{kind}[{index}] is not a valid {kind} record"))
        data[kind] = keep
    return bad
