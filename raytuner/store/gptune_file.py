"""GPTune history files: read one (any schema GPTune wrote), write one atomically and durably.

A GPTune history file is one JSON object: ``tuning_problem_name``, the
``func_eval`` records and the ``surrogate_model`` records. Older schemas
(``name``, ``model_data``, ``I``/``P``/``O`` records: see
:mod:`raytuner.store.gptune_schemas`) are read into today's; the document's
``read_report`` says what was read, skipped and converted. Writing goes
through a temporary file beside the target, fsync, an atomic rename and an
fsync of the directory, so a reader sees the old file or the new one, never
a torn one.

Example:
    >>> import tempfile, os
    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.json")
    >>> record = FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0})
    >>> write_history_file(path, HistoryDocument(tuning_problem_name="demo", func_eval=[record]))
    >>> [r.evaluation_result for r in read_history_file(path).func_eval]
    [{'y': 2.0}]
"""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path
from typing import Any

from raytuner.problem.records import HistoryDocument
from raytuner.problem.space import ProblemSpace
from raytuner.store.gptune_schemas import normalise_history
from raytuner.store.journal import FUNC_EVAL as _FUNC_EVAL
from raytuner.store.journal import SURROGATE_MODEL as _SURROGATE
from raytuner.store.journal import fsync_dir
from raytuner.store.jsonfile import parse_json_file
from raytuner.store.jsontext import dumps_standard

__all__ = ["HISTORY_FILE", "parse_history", "read_history_file", "write_history_file", "history_text"]

#: What a GPTune history file holds, for error messages.
HISTORY_FILE = "a GPTune history: tuning_problem_name, func_eval, surrogate_model"
_SEPARATORS = (", ", ": ")


def parse_history(data: Any, problem: ProblemSpace | None = None) -> HistoryDocument:
    """A GPTune history's JSON value (any schema) as a document whose ``read_report`` says what was read.

    Args:
        data: The parsed JSON.
        problem: Converts values written as strings by the problem's types (default: by inference).

    >>> doc = parse_history({"name": "old", "func_eval": [{"I": {"t": 1}, "P": {"x": "0.5"}, "O": {"y": 2}}]})
    >>> doc.tuning_problem_name, doc.func_eval[0].tuning_parameter, doc.read_report.schema
    ('old', {'x': 0.5}, 4)
    """
    normalised, report = normalise_history(data, problem)
    document = HistoryDocument.model_validate(normalised)
    document.read_report = report
    return document


def read_history_file(path: str | os.PathLike[str], problem: ProblemSpace | None = None) -> HistoryDocument:
    """Read a GPTune history file of any schema (for example one GPTune itself wrote).

    Args:
        path: The file.
        problem: Converts values written as strings by the problem's types (default: by inference).

    Raises:
        InvalidInputError: naming the file (and the field in it) when it cannot
            be read, is not JSON, or is not a GPTune history file.

    >>> doc = read_history_file("tests/data/gptune/GPTune-Demo.json")  # doctest: +SKIP
    >>> len(doc.func_eval), len(doc.surrogate_model)                        # doctest: +SKIP
    (70, 35)
    """
    return parse_json_file(path, lambda data: parse_history(data, problem), HISTORY_FILE)


def _dump_one_record_per_line(data: dict[str, Any], fh: Any) -> None:
    """Write a GPTune document with one record per line.

    Plain JSON that GPTune's readers (``json.load``) take as they take an
    indented file, but about five times faster to write than ``indent=2``
    and written record by record, so a compaction holds no second copy of
    the history as one big string. Standard JSON (RFC 8259): a value that is
    not a finite number is written as ``null`` (as GPTune writes a failed
    run's outputs) and a lone surrogate as U+FFFD (see :mod:`raytuner.store.jsontext`).
    """
    lists = [k for k in (_SURROGATE, _FUNC_EVAL) if isinstance(data.get(k), list)]
    header = {k: v for k, v in data.items() if k not in lists}
    fh.write(dumps_standard(header, separators=_SEPARATORS)[:-1])  # the header object without its closing brace
    for i, kind in enumerate(lists):
        sep = ", " if header or i else ""
        fh.write(f'{sep}"{kind}": [')
        for j, record in enumerate(data[kind]):
            fh.write(("\n" if j == 0 else ",\n") + dumps_standard(record, separators=_SEPARATORS))
        fh.write("\n]" if data[kind] else "]")
    fh.write("}\n")


def history_text(document: HistoryDocument) -> str:
    """A GPTune history file's text (one record per line, as :func:`write_history_file` writes it).

    Args:
        document: the records.

    >>> import json
    >>> parse_history(json.loads(history_text(HistoryDocument(tuning_problem_name="p")))).tuning_problem_name
    'p'
    """
    buffer = io.StringIO()
    _dump_one_record_per_line(document.to_dict(), buffer)
    return buffer.getvalue()


def _create_temporary(target: Path) -> tuple[int, Path]:
    """Create a new file beside ``target`` with the permissions ``open()`` gives (0666 less the umask)."""
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def write_history_file(path: str | os.PathLike[str], document: HistoryDocument | dict[str, Any]) -> None:
    """Write a GPTune history file atomically and durably (temp file, fsync, rename).

    The file gets the permissions a plain ``open()`` would give it (the umask
    applies), so a file meant for sharing can be read by others.

    Args:
        path: The file to write (replaced whole).
        document: The records, as a document or its JSON object.
    """
    target = Path(path)
    data = document.to_dict() if isinstance(document, HistoryDocument) else document
    fd, tmp = _create_temporary(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            _dump_one_record_per_line(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(target.parent)
