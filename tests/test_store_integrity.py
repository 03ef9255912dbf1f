"""Nothing stored is lost: reads never write, unreadable journal lines are quarantined, batches are all or none.

Against the real stores: a JSON store directory and a real ``mongod``.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raytuner.cli import main
from raytuner.errors import InvalidInputError, StoreError
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance, SurrogateModelRecord
from raytuner.store import HistoryStore, JsonStore, StoreSource, read_history_file, write_history_file

PROBLEM = "integrity"


def _evaluation(i: int, **task: Any) -> FunctionEvaluation:
    return FunctionEvaluation.create(
        task or {"t": float(i % 3)}, {"x": i / 100}, {"y": float(i)}, provenance=Provenance(engine="test")
    )


def _model(i: int) -> SurrogateModelRecord:
    return SurrogateModelRecord(hyperparameters={"lengthscale": [0.1 * (i + 1)]}, modeler="Model_LCM")


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory``: its bytes and its modification time."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _journal_lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


@pytest.fixture
def store_with_journal(tmp_path: Path) -> Path:
    """A store whose GPTune file holds 10 evaluations and 10 models and whose journal holds 10 more of each."""
    directory = tmp_path / "store"
    store = JsonStore(directory)
    for i in range(10):
        store.append(PROBLEM, _evaluation(i))
        store.append_model(PROBLEM, _model(i))
    store.compact(PROBLEM)
    for i in range(10, 20):
        store.append(PROBLEM, _evaluation(i))
        store.append_model(PROBLEM, _model(i))
    store._problems[PROBLEM].close()  # a writer killed before it could compact: no close()
    store._problems.clear()
    return directory


def _flip_first_byte(journal: Path, line_index: int) -> tuple[int, bytes]:
    """Change the first byte of one journal line; returns its offset and the damaged line."""
    raw = journal.read_bytes()
    lines = raw.split(b"\n")
    offset = sum(len(line) + 1 for line in lines[:line_index])
    damaged = raw[:offset] + b"X" + raw[offset + 1 :]
    journal.write_bytes(damaged)
    return offset, damaged.split(b"\n")[line_index]


def test_a_corrupt_journal_line_is_read_around_and_history_show_changes_no_byte(
    store_with_journal: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = store_with_journal / f"{PROBLEM}.json.journal"
    damaged_kind = json.loads(_journal_lines(journal)[1])["kind"]  # line 1 of the journal
    offset, damaged = _flip_first_byte(journal, 1)
    before = _files(store_with_journal)

    result = CliRunner().invoke(main, ["history", "show", str(store_with_journal), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    counts = {"func_eval": 20, "surrogate_model": 20}
    counts[damaged_kind] -= 1  # every intact record, and only that one missing
    assert (summary["func_eval"], summary["surrogate_model"]) == (counts["func_eval"], counts["surrogate_model"])

    with caplog.at_level(logging.WARNING, logger="raytuner.store.json_store"):
        reader = JsonStore(store_with_journal)
        assert len(reader.evaluations(PROBLEM)) == counts["func_eval"]
        assert len(reader.models(PROBLEM)) == counts["surrogate_model"]
        assert len(StoreSource(reader, PROBLEM).evaluations()) == counts["func_eval"]
        reader.close()
    assert any(f"offset(s) {offset}" in m for m in caplog.messages)
    assert _files(store_with_journal) == before  # every file's bytes (and times) unchanged
    assert not (store_with_journal / f"{PROBLEM}.json.corrupt").exists()


def test_the_writers_compaction_quarantines_the_line_whole(store_with_journal: Path) -> None:
    journal = store_with_journal / f"{PROBLEM}.json.journal"
    offset, damaged = _flip_first_byte(journal, 3)
    readable = JsonStore(store_with_journal)
    seen = ({r.uid for r in readable.evaluations(PROBLEM)}, {m.uid for m in readable.models(PROBLEM)})

    writer = JsonStore(store_with_journal)
    writer.append(PROBLEM, extra := _evaluation(99))
    writer.close()  # compacts the journal away

    assert not journal.exists()  # the last writer removed it, empty
    quarantined = [
        json.loads(line) for line in (store_with_journal / f"{PROBLEM}.json.corrupt").read_text().splitlines()
    ]
    assert len(quarantined) == 1
    assert quarantined[0]["offset"] == offset and quarantined[0]["line"].encode() == damaged
    assert quarantined[0]["file"] == f"{PROBLEM}.json.journal" and "not JSON" in quarantined[0]["reason"]
    data = read_history_file(store_with_journal / f"{PROBLEM}.json")
    assert {r.uid for r in data.func_eval} == seen[0] | {extra.uid}  # recovery lost nothing a reader saw
    assert {m.uid for m in data.surrogate_model} == seen[1]


def test_a_torn_tail_is_quarantined_by_the_writer(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    store.append(PROBLEM, first := _evaluation(0))
    journal = tmp_path / f"{PROBLEM}.json.journal"
    torn = b'{"kind":"func_eval","record":{"task_par'
    with open(journal, "ab") as fh:
        fh.write(torn)  # a crash mid-write: no newline
    store.compact(PROBLEM)
    store.close()
    quarantined = json.loads((tmp_path / f"{PROBLEM}.json.corrupt").read_text())
    assert quarantined["line"].encode() == torn and "torn" in quarantined["reason"]
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [first.uid]


def test_non_utf8_lines_are_kept_as_base64(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    store.append(PROBLEM, _evaluation(0))
    journal = tmp_path / f"{PROBLEM}.json.journal"
    with open(journal, "ab") as fh:
        fh.write(b"\xff\xfe garbage\n")
    store.append(PROBLEM, _evaluation(1))
    store.close()
    quarantined = json.loads((tmp_path / f"{PROBLEM}.json.corrupt").read_text())
    import base64

    assert base64.b64decode(quarantined["line_base64"]) == b"\xff\xfe garbage"
    assert len(JsonStore(tmp_path).evaluations(PROBLEM)) == 2


def test_reading_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet"
    store = JsonStore(missing)
    assert store.problems() == [] and store.evaluations("p") == [] and store.models("p") == []
    store.compact("p")
    store.close()
    assert not missing.exists()

    existing = tmp_path / "store"
    writer = JsonStore(existing)
    writer.append(PROBLEM, _evaluation(0))
    writer.close()
    before = _files(existing)
    reader = JsonStore(existing)
    assert len(reader.evaluations(PROBLEM)) == 1 and reader.evaluations("other") == []
    reader.close()
    assert _files(existing) == before  # no lock, journal or GPTune file made


def test_a_store_that_only_read_does_not_compact_on_close(store_with_journal: Path) -> None:
    before = _files(store_with_journal)
    reader = JsonStore(store_with_journal)
    assert len(reader.evaluations(PROBLEM)) == 20
    reader.export_document(PROBLEM)
    reader.close()
    assert _files(store_with_journal) == before


def test_a_failed_import_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    writer = JsonStore(directory)
    writer.append(PROBLEM, _evaluation(0))
    writer.close()
    (directory / f"{PROBLEM}.json").write_text('{"tuning_problem_name": "integrity", "func_eval": [')  # corrupt
    document = HistoryDocument(tuning_problem_name=PROBLEM, func_eval=[_evaluation(i) for i in range(50)])
    source = tmp_path / "import.json"
    write_history_file(source, document)
    before = _files(directory)

    with pytest.raises(StoreError, match="damaged .*raytuner history repair"):
        JsonStore(directory).import_document(document)
    result = CliRunner().invoke(main, ["history", "import", str(source), "--to", str(directory)])
    assert result.exit_code != 0
    assert _files(directory) == before


def test_an_import_with_one_bad_record_writes_nothing(tmp_path: Path) -> None:
    good = [_evaluation(i) for i in range(5)]
    data = HistoryDocument(tuning_problem_name=PROBLEM, func_eval=good).to_dict()
    data["func_eval"].insert(3, {"task_parameter": {"t": 1.0}, "uid": ""})  # the fourth record is bad
    source = tmp_path / "bad.json"
    source.write_text(json.dumps(data))
    directory = tmp_path / "store"
    JsonStore(directory).append(PROBLEM, _evaluation(100))
    before = _files(directory)
    result = CliRunner().invoke(main, ["history", "import", str(source), "--to", str(directory)])
    assert result.exit_code != 0 and "func_eval[3]" in result.stderr
    assert _files(directory) == before
    assert len(JsonStore(directory).evaluations(PROBLEM)) == 1


def test_a_batch_is_one_journal_line_so_a_torn_batch_stores_none(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    batch = [_evaluation(i) for i in range(6)]
    store.append_batch(PROBLEM, batch, [_model(0)])
    journal = tmp_path / f"{PROBLEM}.json.journal"
    (line,) = _journal_lines(journal)
    store._problems[PROBLEM].close()
    store._problems.clear()
    journal.write_bytes(line[: len(line) // 2])  # the batch torn by a crash
    assert JsonStore(tmp_path).evaluations(PROBLEM) == []  # none of it, not a prefix
    journal.write_bytes(line + b"\n")
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [r.uid for r in batch]


def test_repeated_import_counts_only_new_records(store: HistoryStore) -> None:
    document = HistoryDocument(
        tuning_problem_name=PROBLEM, func_eval=[_evaluation(i) for i in range(4)], surrogate_model=[_model(0)]
    )
    assert store.import_document(document) == (4, 1)
    assert store.import_document(document) == (0, 0)
    grown = document.model_copy(update={"func_eval": [*document.func_eval, _evaluation(9)]})
    assert store.import_document(grown) == (1, 0)
    assert len(store.evaluations(PROBLEM)) == 5


def test_a_record_mongodb_cannot_store_stops_the_whole_batch(mongo_store: HistoryStore) -> None:
    batch = [_evaluation(i) for i in range(5)] + [_evaluation(5, t=2**70)]  # beyond BSON's 64-bit integers
    with pytest.raises(InvalidInputError, match=r"evaluations\[5\]"):
        mongo_store.append_many(PROBLEM, batch)
    assert mongo_store.evaluations(PROBLEM) == []
    with pytest.raises(InvalidInputError, match=r"evaluations\[5\]"):
        mongo_store.import_document(
            HistoryDocument(tuning_problem_name=PROBLEM, func_eval=batch, surrogate_model=[_model(0)])
        )
    assert mongo_store.evaluations(PROBLEM) == [] and mongo_store.models(PROBLEM) == []


def test_exported_and_compacted_files_honour_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = JsonStore(tmp_path / "store")
        store.append(PROBLEM, _evaluation(0))
        store.close()
        write_history_file(tmp_path / "shared.json", store.export_document(PROBLEM))
    finally:
        os.umask(old)
    for path in (tmp_path / "store" / f"{PROBLEM}.json", tmp_path / "shared.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_the_ledger_quarantines_a_torn_line_instead_of_cutting_it(tmp_path: Path) -> None:
    from raytuner.store import JsonLedger

    ledger = JsonLedger(tmp_path)
    ledger.append("trials", {"trial_id": "a"})
    ledger.close()
    log_file = tmp_path / ".service" / "trials.jsonl"
    torn = b'{"trial_id": "b", "ta'
    with open(log_file, "ab") as fh:
        fh.write(torn)  # a writer killed mid-line
    reopened = JsonLedger(tmp_path)
    reopened.append("trials", {"trial_id": "c"})
    assert [d["trial_id"] for d in reopened.read("trials")] == ["a", "c"]
    reopened.close()
    kept = json.loads((tmp_path / ".service" / "trials.jsonl.corrupt").read_text())
    assert kept["line"].encode() == torn and kept["file"] == "trials.jsonl"


def test_a_record_that_is_not_json_data_stops_the_whole_batch(tmp_path: Path) -> None:
    batch = [_evaluation(i) for i in range(3)]
    odd = _evaluation(3).model_copy(update={"additional_output": {"tags": {1, 2}}})  # a set: not JSON
    with pytest.raises(InvalidInputError, match=r"records\[3\]"):
        JsonStore(tmp_path).append_many(PROBLEM, [*batch, odd])
    assert list(tmp_path.iterdir()) == []
