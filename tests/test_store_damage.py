"""The ledger, the key registry and the JSON store never lose or refuse durable data.

Each kind of damage (bytes that are not UTF-8, a JSON value that is not an
object, NUL bytes, a torn line, a write cut short by a full disk) on the
ledger's logs, the journal and the GPTune file: readers skip it with one
warning naming the file and offset and write nothing; the writer keeps it
whole in the ``.corrupt`` file; an acknowledged write is never lost, and a
durable one is never reported as failed.
"""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_helpers import DAMAGE, DEEP, ShortWrites

from raytuner.cli import main
from raytuner.engines import RandomSearch
from raytuner.errors import StoreError
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.service.auth import ApiKeys
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonLedger, JsonStore
from raytuner.test_problems import DEMO_PROBLEM

PROBLEM = "damage"


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _record(i: int) -> FunctionEvaluation:
    return FunctionEvaluation.create({"t": 1.0}, {"x": i / 100}, {"y": float(i)})


def _kept(path: Path) -> list[dict[str, Any]]:
    """The quarantined lines of ``path``: file, offset, reason, line."""
    corrupt = path.with_name(path.name + ".corrupt")
    return [json.loads(line) for line in corrupt.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("kind", [*sorted(DAMAGE), "number"])
def test_a_damaged_ledger_line_is_skipped_by_readers_and_kept_by_the_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    ledger = JsonLedger(tmp_path)
    ledger.append("trials", {"trial_id": "a"})
    path = tmp_path / ".service" / "trials.jsonl"
    damage = DAMAGE.get(kind, b"42\n")
    with open(path, "ab") as fh:
        fh.write(damage)
    if damage.endswith(b"\n"):
        ledger.append("trials", {"trial_id": "b"})  # this process checked the log already: no quarantine
    offset = len(b'{"trial_id":"a"}\n')
    before = _files(tmp_path)

    reader = JsonLedger(tmp_path)
    with caplog.at_level(logging.WARNING, logger="raytuner.store.ledger"):
        for _ in range(3):
            assert all(isinstance(d, dict) for d in reader.read("trials"))
    assert _files(tmp_path) == before  # reading wrote nothing
    warnings = [m for m in caplog.messages if "unreadable line" in m]
    assert len(warnings) == 1 and str(path) in warnings[0] and f"byte offset {offset} " in warnings[0]

    JsonLedger(tmp_path).append("trials", {"trial_id": "c"})  # a writer's first append moves it aside
    expected = ["a", "c"] if kind == "torn" else ["a", "b", "c"]
    assert [d["trial_id"] for d in JsonLedger(tmp_path).read("trials")] == expected
    kept = _kept(path)
    assert [(k["file"], k["offset"]) for k in kept] == [("trials.jsonl", offset)]
    line = kept[0].get("line", "").encode() or base64.b64decode(kept[0]["line_base64"])
    assert line == damage.rstrip(b"\n")  # kept whole
    assert damage.rstrip(b"\n") not in path.read_bytes()


def test_a_torn_tail_is_checked_before_every_append(tmp_path: Path) -> None:
    ledger = JsonLedger(tmp_path)
    ledger.append("trials", {"trial_id": "a"})
    ledger.append("trials", {"trial_id": "b"})
    path = tmp_path / ".service" / "trials.jsonl"
    with open(path, "ab") as fh:  # another writer died mid-line after our first append
        fh.write(b'{"trial_id": "x", "ta')
    ledger.append("trials", {"trial_id": "c"})
    assert [d["trial_id"] for d in ledger.read("trials")] == ["a", "b", "c"]
    assert [k["line"] for k in _kept(path)] == ['{"trial_id": "x", "ta']


@pytest.mark.parametrize("log", ["sessions", "trials", "keys"])
def test_a_short_ledger_write_is_a_store_error_that_leaves_no_fragment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: str
) -> None:
    ledger = JsonLedger(tmp_path)
    ledger.append(log, {"n": 0})
    short = ShortWrites(monkeypatch, f"{log}.jsonl")
    short.state = "armed"
    with pytest.raises(StoreError, match=f"cannot append to .*{log}.jsonl: No space left on device"):
        ledger.append(log, {"n": 1, "pad": "x" * 200})
    assert short.state == "done"
    ledger.append(log, {"n": 2})  # the next acknowledged line is whole
    assert [d["n"] for d in JsonLedger(tmp_path).read(log)] == [0, 2]
    assert not (tmp_path / ".service" / f"{log}.jsonl.corrupt").exists()


@pytest.mark.parametrize(
    "line",
    [
        "{}",
        "[]",
        '{"key_id": "nobody", "revoke": true}',
        '{"key_id": 7}',
        '{"key_id": "k", "name": "x", "salt": "zz", "hash": "00", "created": 1}',
    ],
)
def test_a_damaged_key_document_costs_that_key_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, line: str
) -> None:
    keys = ApiKeys(JsonStore(tmp_path).ledger())
    alice = keys.create("alice")
    with open(tmp_path / ".service" / "keys.jsonl", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    bob = keys.create("bob")
    with caplog.at_level(logging.WARNING):
        fresh = ApiKeys(JsonStore(tmp_path).ledger())
        fresh.refresh()
    assert [k.name for k in fresh.list()] == ["alice", "bob"]
    assert fresh.verify(alice) is not None and fresh.verify(bob) is not None
    assert len([m for m in caplog.messages if "skipping" in m]) == 1  # by the ledger ([]) or the registry
    result = CliRunner().invoke(main, ["keys", "list", "--store", str(tmp_path)])
    assert result.exit_code == 0 and "alice" in result.output and "bob" in result.output, result.output


def test_a_failed_compaction_never_fails_a_durable_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = JsonStore(tmp_path, compact_min_bytes=1)  # every append tries to compact
    first = _record(0)
    store.append(PROBLEM, first)

    def disk_full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("raytuner.store.json_store.write_history_file", disk_full)
    records = [_record(i) for i in range(1, 41)]
    with caplog.at_level(logging.WARNING, logger="raytuner.store.json_store"):
        for record in records:
            store.append(PROBLEM, record)  # durable: none raises
    assert any("could not compact" in m for m in caplog.messages)
    journal = tmp_path / f"{PROBLEM}.json.journal"
    assert len(journal.read_bytes().splitlines()) == 40  # one line per record, no retried duplicates
    monkeypatch.undo()
    store.append(PROBLEM, records[0])  # a retried tell's line: read once
    store.close()  # compaction tried again, now it works
    assert not journal.exists()  # the last writer removed it, empty
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [first.uid] + [r.uid for r in records]


def test_a_short_journal_write_is_a_store_error_that_leaves_no_fragment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonStore(tmp_path)
    first = _record(0)
    store.append(PROBLEM, first)
    short = ShortWrites(monkeypatch, f"{PROBLEM}.json.journal")
    short.state = "armed"
    with pytest.raises(StoreError, match="No space left on device"):
        store.append(PROBLEM, _record(1))
    retried = _record(2)
    store.append(PROBLEM, retried)
    journal = tmp_path / f"{PROBLEM}.json.journal"
    assert len(journal.read_bytes().splitlines()) == 2 and journal.read_bytes().endswith(b"\n")
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [first.uid, retried.uid]
    store.close()


def _compacted_store(directory: Path, n: int = 6) -> list[str]:
    store = JsonStore(directory)
    records = [_record(i) for i in range(n)]
    for record in records:
        store.append(PROBLEM, record)
    store.close()
    return [r.uid for r in records]


def test_a_damaged_gptune_file_is_salvaged_with_one_accurate_warning_and_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uids = _compacted_store(tmp_path)
    path = tmp_path / f"{PROBLEM}.json"
    lines = path.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(lines) if uids[2].encode() in line)
    offset = sum(len(line) + 1 for line in lines[:index])
    damaged = lines[index][:30] + b"\xff\x00" + lines[index][32:]
    path.write_bytes(b"\n".join([*lines[:index], damaged, *lines[index + 1 :]]))
    before = _files(tmp_path)

    with caplog.at_level(logging.WARNING, logger="raytuner.store.json_store"):
        reader = JsonStore(tmp_path)
        for _ in range(2):
            assert [r.uid for r in reader.evaluations(PROBLEM)] == uids[:2] + uids[3:]
    assert _files(tmp_path) == before  # reading wrote nothing
    warnings = [m for m in caplog.messages if "damaged" in m]
    assert len(warnings) == 1 and f"byte offset(s) {offset} " in warnings[0]
    assert "atomic writer" not in warnings[0] and f"raytuner history repair {tmp_path} {PROBLEM}" in warnings[0]

    with pytest.raises(StoreError, match=f"damaged at byte offset.s. {offset}; repair it with"):
        JsonStore(tmp_path).append(PROBLEM, _record(9))  # a writer refuses, and says how to repair
    with pytest.raises(StoreError, match="repair it with"):  # a session refuses before its first trial
        space = ProblemSpace.parse(DEMO_PROBLEM)
        TuningSession(space, RandomSearch(space, [{"t": 1.0}], seed=0), JsonStore(tmp_path), PROBLEM)
    assert _files(tmp_path) == before

    result = CliRunner().invoke(main, ["history", "repair", str(tmp_path), PROBLEM])
    assert result.exit_code == 0, result.output
    assert "kept 5 evaluations; moved 1 damaged line(s)" in result.output
    kept = _kept(path)
    assert [(k["file"], k["offset"]) for k in kept] == [(path.name, offset)]
    assert base64.b64decode(kept[0]["line_base64"]) == damaged
    writer = JsonStore(tmp_path)
    writer.append(PROBLEM, _record(9))  # repaired: writers append again
    writer.close()
    assert len(JsonStore(tmp_path).evaluations(PROBLEM)) == 6


def test_a_record_of_the_wrong_kind_in_a_json_valid_file_is_read_around(tmp_path: Path) -> None:
    uids = _compacted_store(tmp_path, 3)
    path = tmp_path / f"{PROBLEM}.json"
    text = path.read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if uids[1] in line)
    broken = '{"uid": "broken", "tuning_parameter": 5},'
    path.write_text(text.replace(line, broken), encoding="utf-8")  # JSON, not a record
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [uids[0], uids[2]]
    moved, kept = JsonStore(tmp_path).repair(PROBLEM)
    assert (moved, kept) == (1, 2) and _kept(path)[0]["line"] == broken.rstrip(",")


def test_repair_of_a_problem_that_is_not_there_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["history", "repair", str(tmp_path), "nothing"])
    assert result.exit_code == 2 and "no problem 'nothing'" in result.output


def test_appends_of_several_processes_take_turns_and_none_is_cut_as_torn(tmp_path: Path) -> None:
    code = (
        "import sys; from raytuner.store import JsonLedger; ledger = JsonLedger(sys.argv[1])\n"
        "for i in range(150): ledger.append('trials', {'writer': sys.argv[2], 'n': i, 'pad': 'x' * 3000})"
    )
    writers = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(w)]) for w in range(4)]
    assert [p.wait(timeout=120) for p in writers] == [0, 0, 0, 0]
    documents = list(JsonLedger(tmp_path).read("trials"))
    assert sorted((d["writer"], d["n"]) for d in documents) == [(str(w), i) for w in range(4) for i in range(150)]
    assert not (tmp_path / ".service" / "trials.jsonl.corrupt").exists()


def test_a_journal_line_nested_past_the_recursion_limit_is_a_damaged_line(tmp_path: Path) -> None:
    """``[[[...]]]`` 100,000 deep: readers skip it, `history show` and `repair` exit 0, the line is kept whole."""
    writer = JsonStore(tmp_path)
    records = [_record(i) for i in range(3)]
    writer.append(PROBLEM, records[0])
    journal = tmp_path / f"{PROBLEM}.json.journal"
    with open(journal, "ab") as fh:
        fh.write(DAMAGE["deep"])
    writer.append(PROBLEM, records[1])
    offset = journal.read_bytes().index(b"\n") + 1
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [r.uid for r in records[:2]]

    shown = CliRunner().invoke(main, ["history", "show", str(tmp_path), "--problem", PROBLEM, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["func_eval"] == 2
    repaired = CliRunner().invoke(main, ["history", "repair", str(tmp_path), PROBLEM])
    assert repaired.exit_code == 0, repaired.output
    assert "kept 2 evaluations; moved 1 damaged line(s)" in repaired.output
    kept = _kept(tmp_path / f"{PROBLEM}.json")
    assert [(k["file"], k["offset"], k["line"].encode()) for k in kept] == [(journal.name, offset, DEEP)]
    writer.append(PROBLEM, records[2])  # the writer goes on
    writer.close()
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [r.uid for r in records]


def test_a_writer_closing_over_an_emptied_file_rewrites_what_it_read(tmp_path: Path) -> None:
    uids = _compacted_store(tmp_path, 4)
    writer = JsonStore(tmp_path)
    writer.append(PROBLEM, _record(9))
    writer.compact(PROBLEM)  # the journal is empty now
    assert len(writer.evaluations(PROBLEM)) == 5  # read whole
    path = tmp_path / f"{PROBLEM}.json"
    path.write_bytes(b"")
    writer.close()
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)][:4] == uids
    assert len(JsonStore(tmp_path).evaluations(PROBLEM)) == 5
    assert [(k["offset"], k["reason"]) for k in _kept(path)] == [(0, "the file is empty")]


def test_a_record_found_invalid_by_a_writer_that_read_the_file_is_quarantined_not_kept(tmp_path: Path) -> None:
    """The same file read again to validate its records is not "damaged since it was read": nothing is held back."""
    uids = _compacted_store(tmp_path, 3)
    path = tmp_path / f"{PROBLEM}.json"
    text = path.read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if uids[1] in line)
    path.write_text(text.replace(line, '{"uid": "broken", "tuning_parameter": 5},'), encoding="utf-8")
    store = JsonStore(tmp_path)
    assert [r.uid for r in store.evaluations(PROBLEM)] == [uids[0], uids[2]]  # read, then read again to validate
    assert store.repair(PROBLEM) == (1, 2)
    store.close()
    assert [r.uid for r in JsonStore(tmp_path).evaluations(PROBLEM)] == [uids[0], uids[2]]
    assert b"broken" not in path.read_bytes() and JsonStore(tmp_path).repair(PROBLEM) == (0, 2)
