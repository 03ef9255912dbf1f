"""The access matrix of issue 53: every RPC of both services and every dashboard page of a tuning service.

A real :class:`TuningServer` on loopback with a real crowd repository (the ``crowd`` fixture: a real
mongod); 4 crowd users in 2 groups, each uploading crowd records at every access level (public,
registered, private, shared with a user, shared with a group); a service-only key; no key. On the
tuning side: alice tunes ``alpha`` with the crowd's records as sources (the server caches what *she*
may see as ``alpha.crowd.alice``) and grants carol her problem, bob tunes ``bravo``, carol uploads
``charlie``, the service key tunes ``ops``. Then every caller calls every RPC on every problem,
session and crowd record, and opens every dashboard page of every problem (over the tuning service
with its key; the crowd pages signed in with it, a Flask test client each): a call that reads what
the caller may not see is a cross-user read, one that changes what belongs to another a cross-user
write. Both counts must be 0, and every legitimate call must still work.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from raytuner.client.remote import RemoteTuner, ServiceError
from raytuner.crowd.cache import crowd_cache_name
from raytuner.dashboard.app import create_app
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.protocol import METADATA_KEY
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.test_problems import DEMO_PROBLEM, demo

USERS = {"alice": ("hpc",), "bob": ("hpc", "ml"), "carol": ("ml",), "dave": ()}
NEXT = {"alice": "bob", "bob": "carol", "carol": "dave", "dave": "alice"}
LEVELS = ("public", "registered", "private", "shared_user", "shared_group")
CALLERS = (*USERS, "service", "nobody")
CACHE = crowd_cache_name("alpha", "alice")
PROBLEMS = ("alpha", CACHE, "bravo", "charlie", "ops", "ghost")
#: Who may read and append to each problem (as the callers are named here); "ghost" does not exist.
READERS = {
    "alpha": {"alice", "carol"},
    CACHE: set(),
    "bravo": {"bob"},
    "charlie": {"carol"},
    "ops": {"service"},
    "ghost": set(),
}
OWNERS = {"alpha": {"alice"}, CACHE: set(), "bravo": {"bob"}, "charlie": {"carol"}, "ops": {"service"}, "ghost": set()}
NOT_FOUND = grpc.StatusCode.NOT_FOUND


def _spec(owner: str, level: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    if level == "shared_user":
        return "shared", (NEXT[owner],), ()
    if level == "shared_group":
        return "shared", (), ("ml",)
    return level, (), ()


def may_see(user: str, label: str) -> bool:
    owner, level = label.split("-")
    access, users, groups = _spec(owner, level)
    return access in ("public", "registered") or owner == user or user in users or bool(set(groups) & set(USERS[user]))


def record(label: str, i: int, t: float = 2.0) -> FunctionEvaluation:
    x = (i + 1) / 24
    return FunctionEvaluation.create({"t": t}, {"x": x}, {"y": demo(x, t)}, additional_output={"label": label})


def meta(problem: str, **more: Any) -> str:
    return json.dumps({"tuning_problem_name": problem, "problem_space": DEMO_PROBLEM, **more})


class Matrix:
    """Counts the calls, the cross-user reads and writes, and the legitimate calls that failed."""

    def __init__(self) -> None:
        self.calls = 0
        self.cross_reads: list[str] = []
        self.cross_writes: list[str] = []
        self.failed: list[str] = []

    def call(self, fn: Callable[[], Any]) -> tuple[grpc.StatusCode, Any]:
        self.calls += 1
        try:
            return grpc.StatusCode.OK, fn()
        except grpc.RpcError as exc:
            return exc.code(), exc.details()

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.failed.append(what)


@pytest.fixture
def world(crowd: tuple[Any, Any, str]) -> Iterator[dict[str, Any]]:
    server, repository, _ = crowd
    keys = {}
    for name, groups in USERS.items():
        repository.add_user(name, f"{name}@example.org", groups)
        keys[name] = repository.create_key(name)
    keys["service"] = server.keys.create("ops")
    keys["nobody"] = ""
    crowd_records: dict[str, FunctionEvaluation] = {}
    for n, (owner, level) in enumerate((o, lv) for o in USERS for lv in LEVELS):
        access, users, groups = _spec(owner, level)
        label = f"{owner}-{level}"
        crowd_records[label] = record(label, n)
        repository.upload(
            keys[owner],
            "alpha",
            [crowd_records[label]],
            access=access,
            shared_with_users=users,
            shared_with_groups=groups,
        )
        repository.upload(
            keys[owner],
            "alpha",
            SurrogateModelRecord(modeler=label),
            access=access,
            shared_with_users=users,
            shared_with_groups=groups,
            kind="surrogate_model",
        )
    sessions = {}
    for who, problem, engine, options in (
        ("alice", "alpha", "mla", {"crowd_sources": True, "n_initial": 2}),
        ("bob", "bravo", "random", {}),
        ("service", "ops", "random", {}),
    ):
        with RemoteTuner(server.address, keys[who], timeout=60) as tuner:
            sessions[who] = tuner.create_session(
                json.loads(meta(problem)), engine, tasks=[{"t": 1.0}], seed=1, options=options
            )
            assert tuner.run(lambda config, task, fidelity: demo(config["x"], 1.0), max_trials=2) == 2
    with RemoteTuner(server.address, keys["carol"], timeout=30) as tuner:
        assert tuner.upload_evaluations("charlie", [record("carol-own", i, 3.0) for i in range(3)]) == 3
    with RemoteTuner(server.address, keys["alice"], timeout=30) as tuner:
        assert tuner.grant_access("alpha", "crowd:dave") == ["crowd:dave"]
        assert tuner.grant_access("alpha", "crowd:carol") == ["crowd:carol", "crowd:dave"]
        assert tuner.grant_access("alpha", "crowd:dave", revoke=True) == ["crowd:carol"]
    channel = grpc.insecure_channel(server.address)
    assert {r.additional_output["label"] for r in server.store.evaluations(CACHE)} == {
        label for label in crowd_records if may_see("alice", label)
    }
    with channel:
        yield {
            "server": server,
            "keys": keys,
            "sessions": sessions,
            "records": crowd_records,
            "stub": pb_grpc.TuningServiceStub(channel),
            "crowd": pb_grpc.CrowdServiceStub(channel),
        }


def test_no_call_reads_or_writes_another_users_data(world: dict[str, Any]) -> None:
    server, keys, stub, matrix = world["server"], world["keys"], world["stub"], Matrix()
    counts = {p: len(server.store.evaluations(p)) for p in PROBLEMS}
    for caller in CALLERS:
        md = [(METADATA_KEY, keys[caller])] if keys[caller] else []
        _tuning_calls(matrix, server, stub, md, caller, counts, world["sessions"])
        _crowd_pages(matrix, world, caller)  # before the caller's own uploads below
        _crowd_calls(matrix, world, md, caller)
        if caller != "nobody":
            _dashboard_pages(matrix, server, keys[caller], caller)
    # what each problem holds changed only by its own readers' uploads (one record each) and new sessions' records
    for problem in PROBLEMS:
        grew = len(server.store.evaluations(problem)) - counts[problem]
        if grew != len(READERS[problem]):
            matrix.cross_writes.append(f"{problem} grew by {grew}")
    print(
        f"\naccess matrix: {matrix.calls} calls and pages, {len(matrix.cross_reads)} cross-user reads, "
        f"{len(matrix.cross_writes)} cross-user writes, {len(matrix.failed)} legitimate calls refused"
    )
    assert (matrix.cross_reads, matrix.cross_writes, matrix.failed) == ([], [], [])
    assert matrix.calls > 500


def _tuning_calls(
    matrix: Matrix,
    server: Any,
    stub: Any,
    md: list[tuple[str, str]],
    caller: str,
    counts: dict[str, int],
    sessions: dict[str, str],
) -> None:
    refused = grpc.StatusCode.UNAUTHENTICATED if not md else NOT_FOUND
    ghost = matrix.call(
        lambda: stub.QueryEvaluations(pb.QueryEvaluationsRequest(problem_name="ghost"), metadata=md, timeout=10)
    )
    matrix.expect(ghost[0] == refused, f"{caller} ghost query: {ghost}")
    for problem in PROBLEMS:
        allowed, name = caller in READERS[problem], f"{caller} on {problem}"
        code, answer = matrix.call(
            lambda: stub.QueryEvaluations(pb.QueryEvaluationsRequest(problem_name=problem), metadata=md, timeout=10)
        )
        if allowed:
            matrix.expect(
                code == grpc.StatusCode.OK
                and len(json.loads(answer.records_json)) == len(server.store.evaluations(problem)),
                f"query {name}: {code}",
            )
        elif code == grpc.StatusCode.OK or (code, answer.replace(problem, "ghost")) != ghost:
            matrix.cross_reads.append(f"query {name}: {code} {answer}")  # records, or an answer unlike ghost's
        if problem != "ghost":
            fresh = json.dumps([record(f"{caller}-upload", 7, 4.0).to_dict()])
            code, _ = matrix.call(
                lambda: stub.UploadEvaluations(
                    pb.UploadEvaluationsRequest(problem_name=problem, records_json=fresh), metadata=md, timeout=10
                )
            )
            matrix.expect(
                (code == grpc.StatusCode.OK) == allowed and (allowed or code == refused), f"upload {name}: {code}"
            )
        for request in (
            pb.CreateSessionRequest(
                problem_json=meta(problem, history={"load_func_eval": "yes"}), engine="random", seed=1
            ),
            pb.CreateSessionRequest(
                problem_json=meta(f"tla-{caller}"),
                engine="tla",
                tasks_json='[{"t": 5}]',
                options_json=json.dumps({"source_problem": problem}),
                seed=1,
            ),
        ):
            session = request.engine == "random"  # only owners start sessions; readers use it as a source
            if (caller in OWNERS[problem] if session else allowed) or problem == "ghost" and session:
                continue  # a new problem or one's own: not a cross-user call
            code, answer = matrix.call(lambda: stub.CreateSession(request, metadata=md, timeout=30))
            if code == grpc.StatusCode.OK:
                matrix.cross_reads.append(f"session {name}: {answer.session_id}")
            matrix.expect(code in (refused, grpc.StatusCode.INVALID_ARGUMENT), f"create {name}: {code} {answer}")
        is_owner = caller in OWNERS[problem]  # an owner revokes (a grant that is not there): the matrix stays
        code, _ = matrix.call(
            lambda: stub.GrantAccess(
                pb.GrantAccessRequest(problem_name=problem, grantee="crowd:dave", revoke=is_owner),
                metadata=md,
                timeout=10,
            )
        )
        if code == grpc.StatusCode.OK and not is_owner:
            matrix.cross_writes.append(f"grant {name}")
        matrix.expect(
            (code == grpc.StatusCode.OK) == is_owner and (is_owner or code == refused), f"grant {name}: {code}"
        )
    own = f"new-{caller}"
    code, _ = matrix.call(
        lambda: stub.UploadEvaluations(
            pb.UploadEvaluationsRequest(problem_name=own, records_json=json.dumps([record("own", 1).to_dict()])),
            metadata=md,
            timeout=10,
        )
    )
    matrix.expect((code == grpc.StatusCode.OK) == bool(md), f"upload {caller} to a new problem: {code}")
    for owner, session_id in sessions.items():
        mine = owner == caller
        for method, request in (
            ("GetSession", pb.GetSessionRequest(session_id=session_id)),
            ("Ask", pb.AskRequest(session_id=session_id)),
            ("Tell", pb.TellRequest(session_id=session_id, trial_id="x", outputs={"y": 1.0})),
            ("Heartbeat", pb.HeartbeatRequest(session_id=session_id, trial_id="x")),
        ):
            if mine and method != "GetSession":
                continue
            code, answer = matrix.call(lambda: getattr(stub, method)(request, metadata=md, timeout=30))
            if not mine and code == grpc.StatusCode.OK:
                (matrix.cross_reads if method == "GetSession" else matrix.cross_writes).append(f"{method} {owner}")
            matrix.expect(code == grpc.StatusCode.OK if mine else code == refused, f"{method} {caller}/{owner}")
        if mine:
            continue
        code, events = matrix.call(
            lambda: list(
                stub.WatchSession(
                    pb.WatchSessionRequest(session_id=session_id, from_start=True), metadata=md, timeout=2
                )
            )
        )
        if not mine and code in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED):
            matrix.cross_reads.append(f"watch {caller}/{owner}: {code}")
    code, listed = matrix.call(lambda: stub.ListSessions(pb.ListSessionsRequest(), metadata=md, timeout=10))
    theirs = {s for o, s in sessions.items() if o != caller}
    if code == grpc.StatusCode.OK:
        matrix.cross_reads.extend(f"list {caller}: {s.session_id}" for s in listed.sessions if s.session_id in theirs)
        matrix.expect(
            caller not in sessions or sessions[caller] in {s.session_id for s in listed.sessions}, f"list {caller}"
        )


def _crowd_calls(matrix: Matrix, world: dict[str, Any], md: list[tuple[str, str]], caller: str) -> None:
    stub, records, repository = world["crowd"], world["records"], world["server"].crowd
    visible = {label for label in records if caller in USERS and may_see(caller, label)}
    query = pb.CrowdQuery(tuning_problem_name="alpha")
    for method in ("QueryFunctionEvaluations", "QuerySurrogateModels"):
        code, batches = matrix.call(lambda: list(getattr(stub, method)(query, metadata=md, timeout=30)))
        got = [] if code != grpc.StatusCode.OK else [r for b in batches for r in json.loads(b.records_json)]
        labels = {(r.get("additional_output") or {}).get("label") or r.get("modeler") for r in got}
        matrix.cross_reads.extend(f"{method} {caller}: {label}" for label in labels - visible)
        matrix.expect(
            labels == visible or not visible and code == grpc.StatusCode.UNAUTHENTICATED, f"{method} {caller}: {code}"
        )
    space = json.dumps({**DEMO_PROBLEM, "output_space": [{"name": "y", "type": "real"}]})  # a query's space
    full = pb.CrowdQuery(tuning_problem_name="alpha", problem_space_json=space)
    for method, request in (
        (
            "QueryPredictOutput",
            pb.CrowdPredictRequest(query=full, task_json='{"t": 2.0}', modeler="GP", parameters_json='[{"x": 0.5}]'),
        ),
        (
            "QuerySensitivityAnalysis",
            pb.CrowdSensitivityRequest(query=full, task_json='{"t": 2.0}', modeler="GP", num_samples=64, seed=1),
        ),
    ):
        code, answer = matrix.call(lambda: getattr(stub, method)(request, metadata=md, timeout=60))
        if code == grpc.StatusCode.OK and answer.evaluations > len(visible):
            matrix.cross_reads.append(f"{method} {caller}: fitted to {answer.evaluations}")
        matrix.expect(
            code == grpc.StatusCode.OK if visible else code == grpc.StatusCode.UNAUTHENTICATED,
            f"{method} {caller}: {code} {answer}",
        )
    for label, original in records.items():  # upload a copy of every record under its uid, other values
        copy = record(f"{caller}-copy", 20, 6.0).to_dict() | {"uid": original.uid}
        code, answer = matrix.call(
            lambda: stub.UploadRecords(
                pb.CrowdUploadRequest(tuning_problem_name="alpha", records_json=json.dumps([copy]), access="private"),
                metadata=md,
                timeout=30,
            )
        )
        own = label.startswith(f"{caller}-")
        if code == grpc.StatusCode.OK and not own and answer.duplicates:
            matrix.cross_reads.append(f"upload {caller} over {label}: duplicates {answer.duplicates}")  # exists
        matrix.expect(
            code == grpc.StatusCode.OK and (answer.added, answer.duplicates) == ((0, 1) if own else (1, 0))
            if caller in USERS
            else code == grpc.StatusCode.UNAUTHENTICATED,
            f"upload {caller} {label}",
        )
        owner = label.split("-")[0]
        theirs = [
            r
            for r in repository.evaluations_for(repository.get_user(owner), "alpha")
            if r.uid == original.uid and (r.additional_output or {}).get("label") == label
        ]
        if len(theirs) != 1:
            matrix.cross_writes.append(f"upload {caller} over {label}")


def _dashboard_pages(matrix: Matrix, server: Any, key: str, caller: str) -> None:
    with RemoteTuner(server.address, key, timeout=30) as tuner:
        client = create_app(service=tuner).test_client()
        mine = {p for p in PROBLEMS if caller in OWNERS[p] and p != "charlie"}  # the problems of its sessions
        matrix.calls += 1
        overview = client.get("/").get_data(as_text=True)
        matrix.cross_reads.extend(
            f"overview {caller}: {p}" for p in PROBLEMS if f'"/problem/{p}"' in overview and p not in mine
        )
        matrix.expect(all(f'"/problem/{p}"' in overview for p in mine), f"overview {caller}")
        for problem in PROBLEMS:
            for page in (
                "",
                "/evaluations",
                "/task?task=t%3D1",
                "/brackets",
                "/live",
                "/live.json",
                "/plot/history.svg",
                "/plot/parameter.svg?parameter=x",
                "/plot/correlation.svg",
            ):
                matrix.calls += 1
                status = client.get(f"/problem/{problem}{page}").status_code
                if problem not in mine and status != 404:
                    matrix.cross_reads.append(f"page {caller} {problem}{page}: {status}")
                if problem in mine and page in ("", "/evaluations", "/live.json"):
                    matrix.expect(status == 200, f"page {caller} {problem}{page}: {status}")


def test_the_operator_hands_out_an_imported_problem_and_owners_grant_and_revoke(server: Any, tmp_path: Any) -> None:
    """Records imported into the store directly belong to nobody until the operator says (``keys grant``)."""
    from click.testing import CliRunner

    from raytuner.cli import main

    server.store.append_many("imported", [record("imported", i) for i in range(3)])
    alice, bob = server.keys.create("alice"), server.keys.create("bob")
    bob_id = server.keys.verify(bob).key_id
    with RemoteTuner(server.address, alice, timeout=20) as a, RemoteTuner(server.address, bob, timeout=20) as b:
        for call in (
            lambda: a.query_evaluations("imported"),
            lambda: a.upload_evaluations("imported", [record("x", 1)]),
            lambda: a.grant_access("imported", bob_id),
        ):
            with pytest.raises(ServiceError) as info:  # held records, nobody's: not even claimable
                call()
            assert info.value.code == "NOT_FOUND" and "'imported'" in info.value.message
        alice_id = server.keys.verify(alice).key_id
        done = CliRunner().invoke(
            main, ["keys", "grant", "--store", str(server.store.directory), "imported", alice_id, "--owner"]
        )
        assert done.exit_code == 0, done.output
        assert len(a.query_evaluations("imported")) == 3  # the server reads the grant before refusing
        assert a.grant_access("imported", bob_id) == [bob_id]
        assert len(b.query_evaluations("imported")) == 3 and b.upload_evaluations("imported", [record("b", 4)]) == 1
        imported = json.loads(meta("imported"))
        for refused in (
            lambda: b.grant_access("imported", "crowd:carol"),  # a grantee neither grants
            lambda: b.create_session(imported, "random", tasks=[{"t": 1.0}]),
        ):  # nor becomes an owner
            with pytest.raises(ServiceError) as info:
                refused()
            assert info.value.code == "NOT_FOUND"
        assert a.create_session(imported, "random", tasks=[{"t": 1.0}])  # the owner does
        assert a.grant_access("imported", bob_id, revoke=True) == []
        with pytest.raises(ServiceError) as info:
            b.query_evaluations("imported")
        assert info.value.code == "NOT_FOUND"
        for bad in ("", "crowd:", "no spaces allowed"):
            with pytest.raises(ServiceError) as info:
                a.grant_access("imported", bad)
            assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith("grantee")


def test_a_server_without_keys_checks_nothing(tmp_path: Any) -> None:
    from raytuner.service.server import TuningServer

    with TuningServer(tmp_path / "store", auth=False) as server, RemoteTuner(server.address, timeout=20) as tuner:
        server.store.append_many("imported", [record("imported", i) for i in range(2)])
        assert tuner.upload_evaluations("imported", [record("more", 3)]) == 1
        assert len(tuner.query_evaluations("imported")) == 3
        with pytest.raises(ServiceError) as info:
            tuner.grant_access("imported", "crowd:bob")
        assert info.value.code == "INVALID_ARGUMENT"


def _crowd_pages(matrix: Matrix, world: dict[str, Any], caller: str) -> None:
    """The crowd pages, signed in with the caller's key (a service key is refused: then signed out, public only)."""
    records, key = world["records"], world["keys"][caller]
    client = create_app(crowd=world["server"].crowd).test_client()
    if key:
        form = re.search(r'name="form" value="([^"]+)"', client.get("/signin").get_data(as_text=True))
        status = client.post("/signin", data={"api_key": key, "form": form.group(1) if form else ""}).status_code
        matrix.calls += 2
        matrix.expect(status == (303 if caller in USERS else 401), f"sign-in {caller}: {status}")
    visible = {
        label
        for label in records
        if (may_see(caller, label) if caller in USERS else _spec(*label.split("-"))[0] == "public")
    }
    hidden = {records[label].uid for label in records} - {records[label].uid for label in visible}
    for page in (
        "/crowd",
        "/crowd/problem/alpha",
        "/crowd/problem/alpha/download",
        "/crowd/problem/alpha/predict",
        "/crowd/problem/alpha/sensitivity",
    ):
        matrix.calls += 1
        response = client.get(page)
        text = response.get_data(as_text=True)
        matrix.cross_reads.extend(f"crowd page {caller} {page}: {uid}" for uid in hidden if uid in text)
        matrix.expect(response.status_code == 200, f"crowd page {caller} {page}: {response.status_code}")
        if page.endswith("/download"):
            labels = {r["additional_output"]["label"] for r in json.loads(text)["func_eval"]}
            matrix.expect(labels == visible, f"crowd download {caller}: {sorted(labels ^ visible)}")


def test_a_source_problem_is_read_only_by_those_who_may_read_it_whatever_the_crowd_flag(server: Any) -> None:
    alice, bob = server.keys.create("alice"), server.keys.create("bob")
    with RemoteTuner(server.address, alice, timeout=20) as a, RemoteTuner(server.address, bob, timeout=20) as b:
        assert a.upload_evaluations("secret", [record("secret", i) for i in range(4)]) == 4
        answers = []
        for source in ("secret", "ghost"):  # alice's problem, and one that does not exist: one answer
            for flag in ({}, {"crowd_sources": False}):
                with pytest.raises(ServiceError) as info:
                    b.create_session(
                        json.loads(meta("bobs")), "tla", tasks=[{"t": 1.0}], options={"source_problem": source, **flag}
                    )
                answers.append((info.value.code, info.value.message.replace(source, "P")))
        assert set(answers) == {("NOT_FOUND", "options.source_problem: no problem 'P' that this key may read")}
        assert server.manager.list(server.keys.verify(bob).key_id) == []


def test_a_problem_claimed_while_a_session_is_built_stays_its_claimants(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = server.keys.create("alice"), server.keys.create("bob")
    built = server.manager._open

    def open_while_bob_claims(*args: Any, **kwargs: Any) -> Any:
        session = built(*args, **kwargs)  # alice's session is built; bob claims the free problem now
        with RemoteTuner(server.address, bob, timeout=20) as b:
            assert b.upload_evaluations("race", [record("bob", 1)]) == 1
        return session

    monkeypatch.setattr(server.manager, "_open", open_while_bob_claims)
    with RemoteTuner(server.address, alice, timeout=20) as a:
        with pytest.raises(ServiceError) as info:
            a.create_session(json.loads(meta("race")), "random", tasks=[{"t": 1.0}])
        assert info.value.code == "NOT_FOUND"
        monkeypatch.undo()
        with pytest.raises(ServiceError) as info:
            a.query_evaluations("race")  # alice owns nothing of it: bob's record stays his
        assert info.value.code == "NOT_FOUND"
    assert list(server.ledger.read("sessions")) == []
