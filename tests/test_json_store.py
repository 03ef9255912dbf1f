"""JsonStore-specific tests with real processes: kill -9, concurrent writers, torn
journal lines, compaction crashes, and a GPTune file round trip.

Nothing is mocked: writers are separate Python processes that open their own
``JsonStore`` on a shared directory, and crashes are real ``SIGKILL``s.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from record_helpers import known, provenance
from repo_data import GPTUNE_DEMO

from raytuner.errors import StoreError
from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord
from raytuner.store import JsonStore, read_history_file, write_history_file
from raytuner.store.json_store import COMPACT_MIN_BYTES

REPO_ROOT = Path(__file__).resolve().parents[1]
PROBLEM = "crash-test"

#: A writer that appends forever and prints each uid once ``append`` has returned.
_WRITER = textwrap.dedent("""
    import sys
    from raytuner.problem.records import FunctionEvaluation, Provenance
    from raytuner.store import JsonStore

    directory, problem, compact_min_bytes, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = JsonStore(directory, compact_min_bytes=compact_min_bytes)
    machine = {"machine_name": "testbox", "cpu": {"nodes": 1, "cores": 2}}
    software = {"python": {"version_str": "3.11.0", "version_split": [3, 11, 0]}}
    i = 0
    while True:
        rec = FunctionEvaluation.create(
            {"t": float(i % 7)}, {"x": i * 0.001, "n": i, "algo": "lu"}, {"y": float(i)},
            provenance=Provenance(engine="random", trial_id=f"{tag}-{i}"),
            machine_configuration=machine, software_configuration=software)
        store.append(problem, rec)
        sys.stdout.write(rec.uid + "\\n")
        sys.stdout.flush()
        i += 1
""")

#: A writer for the concurrency test: waits for "go" on stdin, appends N, prints "done".
_BATCH_WRITER = textwrap.dedent("""
    import sys
    from raytuner.problem.records import FunctionEvaluation, Provenance
    from raytuner.store import JsonStore

    directory, problem, compact_min_bytes, tag, n = (
        sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    store = JsonStore(directory, compact_min_bytes=compact_min_bytes)
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    assert sys.stdin.readline().strip() == "go"
    for i in range(n):
        rec = FunctionEvaluation.create(
            {"t": 1.0}, {"x": i * 0.01, "worker": tag}, {"y": float(i)},
            provenance=Provenance(engine="random", trial_id=f"{tag}-{i}"),
            machine_configuration={"machine_name": "testbox", "cpu": {"nodes": 1, "cores": 2}})
        store.append(problem, rec)
    store.close()
    sys.stdout.write("done\\n")
    sys.stdout.flush()
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def _record(i: int, **extra: Any) -> FunctionEvaluation:
    return FunctionEvaluation.create(
        {"t": 1.0},
        {"x": i * 0.1, "n": i},
        {"y": float(i)},
        provenance=Provenance(engine="test", trial_id=str(i)),
        **extra,
    )


def _journal(store: JsonStore, problem: str) -> Path:
    return store.path(problem).with_name(store.path(problem).name + ".journal")


def _uids(records: list[FunctionEvaluation]) -> list[str]:
    return [r.uid for r in records]


# -- kill -9 ---------------------------------------------------------------------------------


def _compaction_temps(directory: Path) -> set[str]:
    return {p.name for p in directory.glob(f".{PROBLEM}.json.*.tmp")}


def _run_and_kill(
    directory: Path, compact_min_bytes: int, kill_after: int, tag: str, during_compaction: bool = False
) -> list[str]:
    """Start a writer, SIGKILL it after ``kill_after`` acknowledgements; return every acknowledged uid.

    With ``during_compaction`` the kill waits, after ``kill_after`` acknowledgements, until
    a compaction is writing its temporary GPTune file, and lands in the middle of it.
    """
    stale = _compaction_temps(directory)  # left by earlier killed compactions
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(directory), PROBLEM, str(compact_min_bytes), tag],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    acked: list[str] = []
    try:
        assert proc.stdout is not None
        while len(acked) < kill_after:
            line = proc.stdout.readline()
            if not line:
                proc.wait(timeout=10)
                pytest.fail(f"writer exited early (rc={proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
            acked.append(line.strip())
        if during_compaction:
            deadline = time.monotonic() + 120  # seconds normally; the bound only catches a writer that never compacts
            while not _compaction_temps(directory) - stale:
                assert proc.poll() is None, "the writer died before a compaction"
                assert time.monotonic() < deadline, "no compaction started"
        assert proc.poll() is None, "the writer must still be appending when it is killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # uids already in the pipe were acknowledged too (each line is one atomic pipe write)
        acked.extend(line.strip() for line in proc.stdout.read().splitlines() if line.strip())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return acked


def _check_after_crash(directory: Path, acked: list[str]) -> None:
    main = directory / f"{PROBLEM}.json"
    if main.exists():  # only ever replaced by an atomic rename: always a whole GPTune file
        read_history_file(main)
    with open(main.with_name(main.name + ".journal"), "rb") as fh:
        fh.read()
    store = JsonStore(directory)
    try:
        uids = _uids(store.evaluations(PROBLEM))
        assert len(uids) == len(set(uids)), "a record was duplicated"
        missing = set(acked) - set(uids)
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
        # acknowledged records keep their append order
        position = {uid: n for n, uid in enumerate(uids)}
        assert [position[u] for u in acked] == sorted(position[u] for u in acked)
        assert store.problems() == [PROBLEM]  # a temporary file left by a killed compaction is ignored
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("compact_min_bytes", [COMPACT_MIN_BYTES, 2000], ids=["default", "compact-2000"])
def test_kill_9_loses_no_acknowledged_record(tmp_path: Path, compact_min_bytes: int) -> None:
    acked: list[str] = []
    # several crashes in the same directory: each writer starts on what the last one left
    compacting = compact_min_bytes < COMPACT_MIN_BYTES
    for round_, (kill_after, during_compaction) in enumerate([(300, False), (357, compacting), (411, compacting)]):
        acked += _run_and_kill(
            tmp_path, compact_min_bytes, kill_after, tag=f"r{round_}", during_compaction=during_compaction
        )
        if during_compaction:
            assert _compaction_temps(tmp_path), "the kill was meant to land inside a compaction"
        _check_after_crash(tmp_path, acked)
    # after a compaction (a writer's step: closing a store that only read writes nothing)
    # everything is in the GPTune file alone
    store = JsonStore(tmp_path)
    n = len(store.evaluations(PROBLEM))
    store.compact(PROBLEM)
    store.close()
    data = json.loads((tmp_path / f"{PROBLEM}.json").read_text())
    assert len(data["func_eval"]) == n >= len(acked)
    assert set(acked) <= {r["uid"] for r in data["func_eval"]}
    assert not _journal(JsonStore(tmp_path), PROBLEM).exists()  # the last writer removed it, empty


# -- concurrent writers ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("compact_min_bytes", [COMPACT_MIN_BYTES, 2000], ids=["default", "compact-2000"])
def test_four_processes_append_concurrently(tmp_path: Path, compact_min_bytes: int) -> None:
    workers, per_worker = 4, 250
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _BATCH_WRITER,
                str(tmp_path),
                PROBLEM,
                str(compact_min_bytes),
                f"w{k}",
                str(per_worker),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for k in range(workers)
    ]
    try:
        for p in procs:  # barrier: every writer has opened its store before any appends
            assert p.stdout is not None and p.stderr is not None
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    store = JsonStore(tmp_path)
    records = store.evaluations(PROBLEM)
    assert len(records) == workers * per_worker
    assert len(set(_uids(records))) == workers * per_worker
    for k in range(workers):  # each writer's records in its own order
        mine = [known(provenance(r).trial_id) for r in records]
        mine = [t for t in mine if t.startswith(f"w{k}-")]
        assert mine == [f"w{k}-{i}" for i in range(per_worker)]
    store.close()

    with open(tmp_path / f"{PROBLEM}.json", encoding="utf-8") as fh:
        data = json.load(fh)
    assert len(data["func_eval"]) == workers * per_worker
    assert len({r["uid"] for r in data["func_eval"]}) == workers * per_worker
    assert not _journal(store, PROBLEM).exists()  # the last writer removed it, empty


# -- torn journal line -----------------------------------------------------------------------


def test_torn_last_journal_line_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = JsonStore(tmp_path)
    first = [_record(i) for i in range(3)]
    for rec in first:
        store.append("torn", rec)
    journal = _journal(store, "torn")
    torn = json.dumps({"kind": "func_eval", "record": _record(99).to_dict()})[:57]  # no newline
    with open(journal, "ab") as fh:
        fh.write(torn.encode())

    reader = JsonStore(tmp_path)
    assert _uids(reader.evaluations("torn")) == _uids(first)

    later = _record(3)
    store.append("torn", later)  # the next append starts on a fresh line
    with caplog.at_level(logging.WARNING, logger="raytuner.store.json_store"):
        assert _uids(reader.evaluations("torn")) == _uids(first) + [later.uid]
    assert any("torn" in m for m in caplog.messages)
    assert _uids(JsonStore(tmp_path).evaluations("torn")) == _uids(first) + [later.uid]

    store.close()
    reader.close()
    data = read_history_file(tmp_path / "torn.json")
    assert _uids(data.func_eval) == _uids(first) + [later.uid]
    assert not journal.exists()  # the last writer removed it, empty


def test_torn_line_of_an_only_record(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    with open(_journal(store, "only"), "wb") as fh:
        fh.write(b'{"kind":"func_eval","rec')
    assert store.evaluations("only") == []
    rec = _record(0)
    store.append("only", rec)
    assert _uids(JsonStore(tmp_path).evaluations("only")) == [rec.uid]
    store.close()


# -- compaction ------------------------------------------------------------------------------


def test_close_compacts_into_a_gptune_file(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    records = [
        _record(i, machine_configuration={"machine_name": "m", "cpu": {"nodes": 1, "cores": 4}}) for i in range(20)
    ]
    store.append_many("comp", records[:10])
    for rec in records[10:]:
        store.append("comp", rec)
    model = SurrogateModelRecord(
        hyperparameters={"lengthscale": [0.1]}, modeler="Model_GPy_LCM", function_evaluations=_uids(records)
    )
    store.append_model("comp", model)
    assert not store.path("comp").exists()  # still only in the journal
    store.close()

    with open(tmp_path / "comp.json", encoding="utf-8") as fh:
        data = json.load(fh)
    assert {"tuning_problem_name", "tuning_problem_category", "surrogate_model", "func_eval"} <= set(data)
    assert data["tuning_problem_name"] == "comp"
    assert [r["uid"] for r in data["func_eval"]] == _uids(records)
    assert data["func_eval"] == [r.to_dict() for r in records]
    assert data["surrogate_model"] == [model.to_dict()]
    doc = read_history_file(tmp_path / "comp.json")
    assert _uids(doc.func_eval) == _uids(records)
    assert doc.surrogate_model[0].uid == model.uid
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comp.json"]  # the last writer removed the rest
    assert not list(tmp_path.glob(".*.tmp"))


def test_crash_between_rename_and_journal_truncation(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    old = [_record(i) for i in range(5)]
    new = [_record(i) for i in range(5, 10)]
    for rec in old:
        store.append("crash", rec)
    store.compact("crash")  # the GPTune file holds `old`, the journal is empty
    for rec in new:
        store.append("crash", rec)
    journal = _journal(store, "crash")
    journal_before = journal.read_bytes()
    assert journal_before.count(b"\n") == 5
    # the compaction's atomic rename happened, the truncation did not
    write_history_file(store.path("crash"), store.export_document("crash"))
    assert journal.read_bytes() == journal_before
    assert len(read_history_file(store.path("crash")).func_eval) == 10

    fresh = JsonStore(tmp_path)
    assert _uids(fresh.evaluations("crash")) == _uids(old + new)
    extra = _record(10)
    fresh.append("crash", extra)
    assert _uids(fresh.evaluations("crash")) == _uids(old + new) + [extra.uid]
    fresh.close()
    store.close()
    data = json.loads(store.path("crash").read_text())
    assert [r["uid"] for r in data["func_eval"]] == _uids(old + new) + [extra.uid]
    assert not journal.exists()  # the last writer removed it, empty


def test_automatic_compaction_during_appends(tmp_path: Path) -> None:
    store = JsonStore(tmp_path, compact_min_bytes=2000)
    records = [_record(i) for i in range(60)]
    for rec in records:
        store.append("auto", rec)
    assert store.path("auto").exists()  # compacted on the way
    assert _journal(store, "auto").stat().st_size < store.path("auto").stat().st_size
    assert _uids(JsonStore(tmp_path).evaluations("auto")) == _uids(records)
    store.close()


def test_repeated_append_is_idempotent(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    rec = _record(0)
    store.append("idem", rec)
    store.append("idem", rec)
    assert _uids(store.evaluations("idem")) == [rec.uid]
    store.close()
    assert len(json.loads(store.path("idem").read_text())["func_eval"]) == 1


# -- GPTune file round trip ------------------------------------------------------------------


def test_gptune_demo_round_trip(tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    assert store.import_document(read_history_file(GPTUNE_DEMO)) == (70, 35)
    store.close()

    with open(GPTUNE_DEMO, encoding="utf-8") as fh:
        original = json.load(fh)
    with open(tmp_path / "store" / "GPTune-Demo.json", encoding="utf-8") as fh:
        written = json.load(fh)
    for kind, count in (("func_eval", 70), ("surrogate_model", 35)):
        assert len(written[kind]) == len(original[kind]) == count
        assert {r["uid"]: r for r in written[kind]} == {r["uid"]: r for r in original[kind]}
        assert written[kind] == original[kind]  # same records, same order
    assert written == original


# -- bad directory ---------------------------------------------------------------------------


def test_directory_that_is_a_file_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text("{}")
    with pytest.raises(StoreError, match="is a file"):
        JsonStore(path)


def test_a_torn_gptune_file_is_read_around_and_refused_to_writers(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"tuning_problem_name": "bad", "func_eval": [')
    store = JsonStore(tmp_path)
    assert store.evaluations("bad") == []
    with pytest.raises(StoreError, match="damaged at byte offset.s. 45; repair it with `raytuner history repair"):
        store.append("bad", _record(0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # refused before anything is made
