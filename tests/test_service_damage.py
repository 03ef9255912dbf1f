"""Damaged ledgers, journals and GPTune files under a real loopback server: it starts, nothing acknowledged is lost.

Each case runs the tuning service (:class:`~raytuner.service.server.TuningServer`
on 127.0.0.1), creates sessions, hands out trials and tells some, stops the
server, damages one file (a line of bytes that are not UTF-8, a ``[]`` line,
NUL bytes, a torn last line, a damaged record of the GPTune file) or makes one
write short (half written, then ``ENOSPC``), starts a new server on the same
store and counts the acknowledged asks and tells it lost: every acknowledged
pending trial must be tellable and every acknowledged record must be there.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from record_helpers import provenance
from store_helpers import DAMAGE, DEEP, ShortWrites

from raytuner.cli import main
from raytuner.errors import StoreError
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.server import TuningServer
from raytuner.store import JsonStore

PROBLEM = "damage_demo"
META = {
    "tuning_problem_name": PROBLEM,
    "problem_space": {
        "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
        "output_space": [{"name": "y"}],
    },
}
SESSIONS, ASKED, TOLD = 3, 4, 2  # per session: trials asked, of which told


class Client:
    """A raw stub with the key of ``alice``; each call has a bounded deadline."""

    def __init__(self, address: str, key: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.TuningServiceStub(self.channel)
        self.metadata = (("x-api-key", key),)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.stub, name)
        return lambda request: method(request, metadata=self.metadata, timeout=30)

    def close(self) -> None:
        self.channel.close()


@dataclass
class Acknowledged:
    """What the first server acknowledged: sessions, trials handed out (by session) and records told."""

    key: str = ""
    sessions: list[str] = field(default_factory=list)
    asked: dict[str, list[str]] = field(default_factory=dict)
    told: dict[str, dict[str, float]] = field(default_factory=dict)


def _retrying(call: Callable[[], Any], refused: list[str] | None = None, attempts: int = 3) -> Any:
    """``call()``, retried on UNAVAILABLE as a client's retry policy does; each refusal's message into ``refused``."""
    for attempt in range(attempts):
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == attempts - 1:
                raise
            if refused is not None:
                refused.append(exc.details())
    raise AssertionError("unreachable")


def _work(client: Client, acked: Acknowledged, sessions: int = SESSIONS, refused: list[str] | None = None) -> None:
    """Create sessions, ask ``ASKED`` trials of each and tell ``TOLD`` of them, recording what was acknowledged."""
    for s in range(sessions):
        created = _retrying(
            functools.partial(
                client.CreateSession,
                pb.CreateSessionRequest(problem_json=json.dumps(META), engine="random", seed=11 + s),
            ),
            refused,
        )
        sid = created.session_id
        acked.sessions.append(sid)
        acked.asked[sid], acked.told[sid] = [], {}
        for t in range(ASKED):
            trial_id = f"s{s}-t{t}"
            answer = _retrying(functools.partial(client.Ask, pb.AskRequest(session_id=sid, trial_id=trial_id)), refused)
            assert answer.status == pb.AskResponse.TRIAL
            acked.asked[sid].append(trial_id)
            if t < TOLD:
                value = json.loads(answer.config_json)["x"]
                _retrying(
                    functools.partial(
                        client.Tell, pb.TellRequest(session_id=sid, trial_id=trial_id, outputs={"y": value})
                    ),
                    refused,
                )
                acked.told[sid][trial_id] = value


def _first_run(store: Path, sessions: int = SESSIONS) -> Acknowledged:
    server = TuningServer(store, port=0)
    server.start()
    acked = Acknowledged(key=server.keys.create("alice"))
    client = Client(server.address, acked.key)
    try:
        _work(client, acked, sessions)
    finally:
        client.close()
        server.stop(grace=0)
    return acked


def _lost_after_restart(store: Path, acked: Acknowledged) -> dict[str, int]:
    """Start a new server on ``store`` and count what it lost of ``acked``: asks, tells, sessions."""
    server = TuningServer(store, port=0)
    server.start()  # must not raise, whatever the damage
    client = Client(server.address, acked.key)
    lost = {"sessions": 0, "asks": 0, "tells": 0}
    try:
        for sid in acked.sessions:
            try:
                client.GetSession(pb.GetSessionRequest(session_id=sid))
            except grpc.RpcError:
                lost["sessions"] += 1
                lost["asks"] += len(acked.asked[sid]) - len(acked.told[sid])
                lost["tells"] += len(acked.told[sid])
                continue
            for trial_id in acked.asked[sid]:
                if trial_id in acked.told[sid]:
                    continue  # a pending trial must still be tellable
                try:
                    _retrying(
                        functools.partial(
                            client.Tell, pb.TellRequest(session_id=sid, trial_id=trial_id, outputs={"y": 0.5})
                        )
                    )
                except grpc.RpcError:
                    lost["asks"] += 1
        stored = {provenance(r).trial_id: r.evaluation_result["y"] for r in JsonStore(store).evaluations(PROBLEM)}
        lost["tells"] += sum(stored.get(t) != v for told in acked.told.values() for t, v in told.items())
    finally:
        client.close()
        server.stop(grace=0)
    return lost


def _insert_after_first_line(path: Path, damage: bytes) -> None:
    """Put a damaged line after the first line (a torn piece goes at the end, where a killed writer leaves one)."""
    raw = path.read_bytes()
    if not damage.endswith(b"\n"):
        path.write_bytes(raw + damage)
        return
    first = raw.index(b"\n") + 1
    path.write_bytes(raw[:first] + damage + raw[first:])


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("log", ["sessions", "trials", "keys"])
def test_a_damaged_ledger_line_costs_nothing_acknowledged(tmp_path: Path, log: str, kind: str) -> None:
    store = tmp_path / "store"
    acked = _first_run(store)
    path = store / ".service" / f"{log}.jsonl"
    _insert_after_first_line(path, DAMAGE[kind])
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}
    offset = len(path.read_bytes()) - len(DAMAGE[kind]) if kind == "torn" else path.read_bytes().index(b"\n") + 1
    repaired = CliRunner().invoke(main, ["history", "repair", str(store)])  # the writer's side: moved aside
    assert repaired.exit_code == 0 and f"ledger {log}: moved 1 damaged line(s)" in repaired.output, repaired.output
    kept = [json.loads(line) for line in path.with_name(path.name + ".corrupt").read_text().splitlines()]
    assert [(k["file"], k["offset"]) for k in kept] == [(path.name, offset)]
    assert b"\n" + DAMAGE[kind].rstrip(b"\n") not in path.read_bytes()
    result = CliRunner().invoke(main, ["keys", "list", "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "alice" in result.output


@pytest.mark.parametrize(
    "log, damage",
    [
        ("trials", {"trial_id": 7}),
        ("trials", {"trial_id": "t", "task": [], "config": {}}),
        ("trials", {"trial_id": "t", "task": {}, "config": {}, "provenance": 5}),
        ("sessions", {"owner": 1}),
    ],
)
def test_an_object_line_that_holds_no_entry_costs_nothing_acknowledged(
    tmp_path: Path, log: str, damage: dict[str, Any]
) -> None:
    """A JSON object of the right session with fields missing or of another type: skipped, the session kept."""
    store = tmp_path / "store"
    acked = _first_run(store)
    line = json.dumps({"session_id": acked.sessions[0], **damage}).encode() + b"\n"
    path = store / ".service" / f"{log}.jsonl"
    if log == "sessions":  # after the session's own spec, which comes first
        path.write_bytes(path.read_bytes() + line)
    else:
        _insert_after_first_line(path, line)
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_journal_line_costs_nothing_acknowledged(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "store"
    acked = _first_run(store)
    _insert_after_first_line(store / f"{PROBLEM}.json.journal", DAMAGE[kind].replace(b"session_id", b"kind"))
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}


def _damage_a_record(path: Path, kind: str) -> None:
    """Damage the GPTune file's second func_eval record line the way ``kind`` says (``torn``: the file ends in it)."""
    lines = path.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(lines) if b'"func_eval": [' in line) + 2
    line = lines[index]
    lines[index] = {
        "bad_utf8": line[:20] + b"\xff\xfe" + line[22:],
        "not_an_object": b"[],",
        "nul": b"\x00" * len(line),
        "torn": line[: len(line) // 2],
        "deep": DEEP + b",",
    }[kind]
    raw = b"\n".join(lines[: index + 1]) + (b"" if kind == "torn" else b"\n" + b"\n".join(lines[index + 1 :]))
    path.write_bytes(raw)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_gptune_file_is_read_around_and_repaired(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "store"
    acked = _first_run(store)
    writer = JsonStore(store)
    writer.compact(PROBLEM)  # every told record into the GPTune file
    writer.close()
    path = store / f"{PROBLEM}.json"
    stored = [provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)]
    _damage_a_record(path, kind)
    hit = stored[1]  # the record on the damaged line
    intact = [t for t in stored if t != hit] if kind != "torn" else stored[:1]
    assert [provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)] == intact

    with pytest.raises(StoreError, match=f"damaged .*`raytuner history repair {store} {PROBLEM}`"):
        JsonStore(store).append(PROBLEM, JsonStore(store).evaluations(PROBLEM)[0])
    result = CliRunner().invoke(main, ["history", "repair", str(store), PROBLEM])
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in (store / f"{PROBLEM}.json.corrupt").read_text().splitlines()]
    assert kept and kept[0]["file"] == path.name and "offset" in kept[0]
    if kind in ("bad_utf8", "nul"):
        assert kept[0]["line_base64" if kind == "bad_utf8" else "line"].encode() != b""
    assert [provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)] == intact
    # the told records on the lost lines are in the quarantine; re-telling them is what a client's retry does
    for sid in acked.sessions:
        acked.told[sid] = {t: v for t, v in acked.told[sid].items() if t in intact}
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}


@pytest.mark.parametrize("name", ["sessions.jsonl", "trials.jsonl", f"{PROBLEM}.json.journal"])
def test_a_short_write_is_unavailable_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    store = tmp_path / "store"
    short = ShortWrites(monkeypatch, name)
    server = TuningServer(store, port=0)
    server.start()
    acked = Acknowledged(key=server.keys.create("alice"))
    client = Client(server.address, acked.key)
    refused: list[str] = []
    try:
        _work(client, acked, sessions=1)
        short.state = "armed"  # the next write to the file is cut short by a full disk
        _work(client, acked, sessions=2, refused=refused)
    finally:
        client.close()
        server.stop(grace=0)
    assert short.state == "done" and len(refused) == 1  # UNAVAILABLE once, then the retry was stored
    assert "No space left on device" in refused[0]
    path = next(store.rglob(name))
    assert path.read_bytes().endswith(b"\n")  # no fragment left for the next line to be glued to
    monkeypatch.undo()
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}


def test_a_short_write_of_a_key_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from raytuner.service.auth import ApiKeys

    keys = ApiKeys(JsonStore(tmp_path).ledger())
    first = keys.create("alice")
    short = ShortWrites(monkeypatch, "keys.jsonl")
    short.state = "armed"
    with pytest.raises(StoreError, match="No space left"):
        keys.create("bob")
    second = keys.create("bob")  # the retry
    monkeypatch.undo()
    fresh = ApiKeys(JsonStore(tmp_path).ledger())
    assert [k.name for k in fresh.list()] == ["alice", "bob"]
    assert fresh.verify(first) is not None and fresh.verify(second) is not None


def _tell_more(client: Client, acked: Acknowledged, sid: str, count: int) -> None:
    """Ask and tell ``count`` more trials of session ``sid``, recording what was acknowledged."""
    for _ in range(count):
        trial_id = f"more-{len(acked.asked[sid])}"
        answer = client.Ask(pb.AskRequest(session_id=sid, trial_id=trial_id))
        assert answer.status == pb.AskResponse.TRIAL
        acked.asked[sid].append(trial_id)
        value = json.loads(answer.config_json)["x"]
        client.Tell(pb.TellRequest(session_id=sid, trial_id=trial_id, outputs={"y": value}))
        acked.told[sid][trial_id] = value


def test_a_gptune_file_emptied_while_the_server_runs_is_rewritten_and_loses_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    acked = _first_run(store, sessions=2)
    writer = JsonStore(store)
    writer.compact(PROBLEM)  # every told record into the GPTune file, the journal empty
    writer.close()
    path = store / f"{PROBLEM}.json"
    server = TuningServer(store, port=0)
    server.start()
    client = Client(server.address, acked.key)
    try:
        for sid in acked.sessions:
            client.GetSession(pb.GetSessionRequest(session_id=sid))  # rebuilt: the server read the file
        path.write_bytes(b"")  # emptied behind the server's back
        _tell_more(client, acked, acked.sessions[0], 3)
        # as a kill -9 now would leave it: a reader finds every acknowledged record, the file whole again
        stored = {provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)}
        assert stored == {t for told in acked.told.values() for t in told}
        assert (store / f"{PROBLEM}.json.corrupt").exists()  # the emptied file is on record
    finally:
        client.close()
        server.stop(grace=0)
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}
    result = CliRunner().invoke(main, ["history", "repair", str(store), PROBLEM])
    assert result.exit_code == 0, result.output


def test_an_emptied_gptune_file_is_damage_that_repair_rebuilds_from_the_journal(tmp_path: Path) -> None:
    """Emptied while no writer held it: the journal's records stay readable, writers refuse, repair rebuilds."""
    store = tmp_path / "store"
    acked = _first_run(store, sessions=1)
    writer = JsonStore(store)
    writer.compact(PROBLEM)
    writer.close()
    compacted = {provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)}
    server = TuningServer(store, port=0)
    server.start()
    client = Client(server.address, acked.key)
    try:
        sid = acked.sessions[0]
        client.GetSession(pb.GetSessionRequest(session_id=sid))
        _tell_more(client, acked, sid, 2)  # into the journal
    finally:
        client.close()
        server.stop(grace=0)
    path = store / f"{PROBLEM}.json"
    path.write_bytes(b"")  # emptied while no writer runs: its records are gone with it
    journaled = {t for t in acked.told[sid] if t not in compacted}
    assert {provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)} == journaled
    with pytest.raises(StoreError, match=f"damaged .*`raytuner history repair {store} {PROBLEM}`"):
        JsonStore(store).append(PROBLEM, JsonStore(store).evaluations(PROBLEM)[0])
    result = CliRunner().invoke(main, ["history", "repair", str(store), PROBLEM])
    assert result.exit_code == 0, result.output
    assert f"kept {len(journaled)} evaluations; moved 1 damaged line(s)" in result.output
    kept = [json.loads(line) for line in (store / f"{PROBLEM}.json.corrupt").read_text().splitlines()]
    assert [(k["file"], k["offset"], k["reason"]) for k in kept] == [(path.name, 0, "the file is empty")]
    assert {provenance(r).trial_id for r in JsonStore(store).evaluations(PROBLEM)} == journaled
    acked.told[sid] = {t: v for t, v in acked.told[sid].items() if t in journaled}  # the rest went with the file
    assert _lost_after_restart(store, acked) == {"sessions": 0, "asks": 0, "tells": 0}
