"""The crowd repository on a real mongod: catalogs, versions, idempotent uploads, filters, throughput."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from repo_data import GPTUNE_DEMO as REPO_GPTUNE_DEMO

from raytuner.crowd import CrowdRepository, Unauthenticated
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, HistoryDocument

log = logging.getLogger(__name__)

GPTUNE_DEMO = str(REPO_GPTUNE_DEMO)


@pytest.fixture
def key(repo: CrowdRepository) -> str:
    repo.add_user("alice", "alice@example.org", ["hpc"])
    return repo.create_key("alice")


def _rec(
    t: Any = 1.0,
    x: float = 0.5,
    machine: str | None = "cori",
    software: dict[str, Any] | None = None,
    nodes: int = 1,
    **extra: Any,
) -> FunctionEvaluation:
    conf = {"machine_name": machine, "haswell": {"nodes": nodes, "cores": 32}} if machine else {}
    return FunctionEvaluation.create(
        {"t": t, **extra}, {"x": x}, {"y": x * 2}, machine_configuration=conf, software_configuration=software or {}
    )


def _ts(records: list[FunctionEvaluation]) -> list[Any]:
    return sorted(r.task_parameter["t"] for r in records)


def test_users_are_validated(repo: CrowdRepository) -> None:
    user = repo.add_user("bob", "Bob@Example.org", ["ml", "hpc", "ml"])
    assert (user.email, user.groups) == ("bob@example.org", ("hpc", "ml"))
    with pytest.raises(InvalidInputError, match="already registered") as err:
        repo.add_user("bob", "other@example.org")
    assert err.value.field == "username"
    with pytest.raises(InvalidInputError) as err:
        repo.add_user("bob2", "BOB@example.org")
    assert err.value.field == "email"
    bad: Any  # each of the names (and a non-name) the repository refuses
    for bad in ("$admin", "a b", {"$gt": ""}, ""):
        with pytest.raises(InvalidInputError):
            repo.add_user(bad, "x@example.org")
    with pytest.raises(InvalidInputError) as err:
        repo.add_user("carl", "carl@example.org", ["$all"])
    assert err.value.field == "groups[0]"
    with pytest.raises(InvalidInputError):
        repo.create_key("nobody")
    repo.add_user("email", "e@example.org")
    with pytest.raises(InvalidInputError) as err:
        repo.add_user("email", "f@example.org")
    assert err.value.field == "username"
    assert repo.set_groups("bob", ["ml"]).groups == ("ml",)


def test_machine_and_software_aliases(repo: CrowdRepository, key: str) -> None:
    assert repo.add_machine("Cori", aliases=["cori", "cori.nersc.gov"]) == "Cori"
    repo.add_software("openmpi", aliases=["OpenMPI", "open-mpi"])
    with pytest.raises(InvalidInputError) as err:
        repo.add_machine("Perlmutter", aliases=["CORI"])  # already Cori's
    assert err.value.field == "aliases"
    assert repo.canonical_machine("CORI.nersc.GOV") == "Cori" and repo.canonical_machine("Summit") == "Summit"
    ver = {"version_str": "4.1.2", "version_split": [4, 1, 2]}
    repo.upload(
        key,
        "demo",
        [
            _rec(1, machine="cori.nersc.gov", software={"OpenMPI": ver}),
            _rec(2, machine="CORI", software={"open-mpi": ver}),
            _rec(3, machine="Summit", software={"mpich": ver}),
            _rec(4, machine="summit"),
        ],
    )
    stored = repo.query_function_evaluations(key, "demo")
    names = {
        r.task_parameter["t"]: (r.machine_configuration["machine_name"], sorted(r.software_configuration))
        for r in stored
    }
    assert names == {1: ("Cori", ["openmpi"]), 2: ("Cori", ["openmpi"]), 3: ("Summit", ["mpich"]), 4: ("summit", [])}
    for alias in ("Cori", "cori", "CORI.NERSC.GOV"):
        got = repo.query_function_evaluations(
            key, "demo", configuration_space={"machine_configurations": [{alias: {}}]}
        )
        assert _ts(got) == [1, 2], alias
    # an unknown machine still matches regardless of case
    got = repo.query_function_evaluations(key, "demo", configuration_space={"machine_configurations": [{"SUMMIT": {}}]})
    assert _ts(got) == [3, 4]
    for alias in ("OpenMPI", "openmpi", "Open-MPI"):
        got = repo.query_function_evaluations(
            key,
            "demo",
            configuration_space={"software_configurations": [{alias: {"version_from": [4], "version_to": [5]}}]},
        )
        assert _ts(got) == [1, 2], alias


def test_versions_compared_as_versions(repo: CrowdRepository, key: str) -> None:
    versions = {1: [5, 9], 2: [5, 10], 3: [8, 3, 0], 4: [9, 0, 0], 5: [9, 0, 1], 6: [10, 1], 7: [8]}
    repo.upload(
        key,
        "v",
        [
            _rec(t, software={"gcc": {"version_str": ".".join(map(str, v)), "version_split": v}})
            for t, v in versions.items()
        ]
        + [_rec(8, software={"gcc": "12.2.0"}), _rec(9, software={"spack": "ScaLAPACK"})],
    )

    def query(rng: dict[str, Any]) -> list[Any]:
        return _ts(
            repo.query_function_evaluations(key, "v", configuration_space={"software_configurations": [{"gcc": rng}]})
        )

    assert query({"version_from": [5, 10], "version_to": [9, 0, 0]}) == [2, 3, 4, 7]
    assert query({"version_from": [5, 9], "version_to": [5, 9]}) == [1]
    assert query({"version_from": [10]}) == [6, 8]
    assert query({"version_to": [8, 0, 0]}) == [1, 2, 7]
    assert query({"version_from": "9.0.1"}) == [5, 6, 8]
    assert query({}) == [1, 2, 3, 4, 5, 6, 7, 8]
    # any of several entries; all packages of one entry
    got = repo.query_function_evaluations(
        key, "v", configuration_space={"software_configurations": [{"gcc": {"version_to": [5, 9]}}, {"spack": {}}]}
    )
    assert _ts(got) == [1, 9]
    with pytest.raises(InvalidInputError) as err:
        query({"version_from": [9], "version_to": [8]})
    assert err.value.field == "configuration_space.software_configurations[0].gcc.version_from"
    with pytest.raises(InvalidInputError) as err:
        query({"version_from": ["9"]})
    assert err.value.field == "configuration_space.software_configurations[0].gcc.version_from"


def test_uploads_are_idempotent_by_uid(repo: CrowdRepository, key: str) -> None:
    records = [_rec(float(t)) for t in range(10)]
    first = repo.upload(key, "demo", records)
    assert (first.given, first.inserted, first.duplicates) == (10, 10, 0)
    again = repo.upload(key, "demo", records[5:] + [_rec(99.0)] + [records[0].to_dict()])
    assert (again.given, again.inserted, again.duplicates) == (7, 1, 6)
    single = repo.upload(key, "demo", records[3])
    assert (single.given, single.inserted) == (1, 0)
    twice = _rec(100.0)
    assert repo.upload(key, "demo", [twice, twice]).inserted == 1  # repeated within one upload
    assert len(repo.query_function_evaluations(key, "demo")) == 12
    assert repo.upload(key, "other", records[0]).inserted == 1  # a uid is unique per problem
    assert repo.upload(key, "demo", []).given == 0


def test_queries_answer_with_the_json_made_at_upload(repo: CrowdRepository, key: str) -> None:
    repo.add_machine("Cori", aliases=["cori"])
    records = [_rec(float(t), machine="cori") for t in range(4)]
    repo.upload(key, "demo", records)
    texts = repo.query_function_evaluations(key, "demo", raw=True)
    assert [json.loads(t)["machine_configuration"]["machine_name"] for t in texts] == ["Cori"] * 4  # canonical
    parsed = repo.query_function_evaluations(key, "demo")
    assert [r.uid for r in parsed] == [r.uid for r in records]
    # a record stored before the JSON copy existed is answered the same
    repo.func_eval.update_many({"uid": {"$in": [records[1].uid, records[3].uid]}}, {"$unset": {"json": ""}})
    assert repo.query_function_evaluations(key, "demo", raw=True) == texts
    assert repo.query_function_evaluations(key, "demo") == parsed


def test_upload_gptune_file(repo: CrowdRepository, key: str) -> None:

    path = REPO_GPTUNE_DEMO
    document = HistoryDocument.model_validate_json(path.read_text())
    raw = [r.to_dict() for r in document.func_eval]
    assert repo.upload(key, "GPTune-Demo", raw, access="registered").inserted == len(raw) == 70
    assert repo.upload(key, "GPTune-Demo", document.surrogate_model, kind="surrogate_model").inserted == 35
    with pytest.warns(DeprecationWarning, match="upload_surrogate_models"):  # the old name still uploads
        assert repo.upload_surrogate_models(key, "GPTune-Demo", document.surrogate_model).duplicates == 35
    got = repo.query_function_evaluations(
        key,
        "GPTune-Demo",
        problem_space={"input_space": [{"name": "t", "type": "real", "lower_bound": 0.0, "upper_bound": 0.0}]},
    )
    assert got and all(r.task_parameter["t"] == 0.0 for r in got)
    assert {r.uid for r in got} <= {r["uid"] for r in raw}
    back = {r.uid: r for r in repo.query_function_evaluations(key, "GPTune-Demo")}
    assert back[raw[0]["uid"]].to_dict() == raw[0]  # the record comes back as uploaded
    assert len(repo.query_surrogate_models(key, "GPTune-Demo")) == 35


def test_problem_and_machine_filters(repo: CrowdRepository, key: str) -> None:
    repo.add_user("bob", "bob@example.org")
    bob = repo.create_key("bob")
    repo.upload(key, "p", [_rec(t, x=t / 10, nodes=1 if t < 5 else 2, kind="lu" if t % 2 else "qr") for t in range(10)])
    repo.upload(bob, "p", [_rec(20 + t, machine="perlmutter", kind="lu") for t in range(3)])
    repo.upload(key, "q", [_rec(0)])

    def q(space: Any = None, config: Any = None, problem: str = "p") -> list[Any]:
        return _ts(repo.query_function_evaluations(key, problem, problem_space=space, configuration_space=config))

    assert q() == list(range(10)) + [20, 21, 22]
    assert q({"input_space": [{"name": "t", "type": "integer", "lower_bound": 2, "upper_bound": 4}]}) == [2, 3, 4]
    assert q({"input_space": [{"name": "t", "lower_bound": 8}]}) == [8, 9, 20, 21, 22]
    assert q({"input_space": [{"name": "kind", "type": "categorical", "categories": ["qr"]}]}) == [0, 2, 4, 6, 8]
    assert q({"input_space": [{"name": "t", "upper_bound": 5}, {"name": "kind", "categories": ["lu"]}]}) == [1, 3, 5]
    assert q({"input_space": [{"name": "missing"}]}) == []
    assert q(
        {
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0.25, "upper_bound": 0.55}],
            "output_space": [{"name": "y", "type": "real"}],
        }
    ) == [3, 4, 5, 20, 21, 22]
    assert q(config={"machine_configurations": [{"cori": {"haswell": {"nodes": 2, "cores": 32}}}]}) == [5, 6, 7, 8, 9]
    assert q(config={"machine_configurations": [{"cori": {"haswell": {"nodes": 1}}}, {"perlmutter": {}}]}) == [
        0,
        1,
        2,
        3,
        4,
        20,
        21,
        22,
    ]
    assert q(config={"machine_configurations": [{"cori": {"knl": {}}}]}) == []
    assert q(config={"user_configurations": ["bob@example.org"]}) == [20, 21, 22]
    assert q(config={"user_configurations": ["alice", "nobody@example.org"]}) == list(range(10))
    assert q(problem="q") == [0] and q(problem="none") == []
    # the paper's example, verbatim shapes
    assert q(
        {
            "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 10}],
            "output_space": [{"name": "y", "type": "real"}],
        },
        {
            "machine_configurations": [{"cori": {"haswell": {"nodes": 1, "cores": 32}}}],
            "software_configurations": [],
            "user_configurations": ["alice"],
        },
    ) == [1, 2, 3, 4]


def test_unreachable_key_after_user_removed(repo: CrowdRepository, key: str) -> None:
    repo.users.delete_one({"_id": "alice"})
    with pytest.raises(Unauthenticated):
        repo.authenticate(key)


def test_bulk_upload_throughput(repo: CrowdRepository, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    n = 20_000
    records = [
        _rec(
            float(i % 100),
            x=(i % 997) / 997,
            nodes=1 + i % 4,
            software={"gcc": {"version_str": f"{8 + i % 4}.{i % 12}.0", "version_split": [8 + i % 4, i % 12, 0]}},
        )
        for i in range(n)
    ]
    start = time.perf_counter()
    result = repo.upload(key, "bulk", records)
    upload_s = time.perf_counter() - start
    assert result.inserted == n
    start = time.perf_counter()
    again = repo.upload(key, "bulk", records[:5000])
    reupload_s = time.perf_counter() - start
    assert again.inserted == 0
    start = time.perf_counter()
    got = repo.query_function_evaluations(
        key,
        "bulk",
        problem_space={"input_space": [{"name": "t", "lower_bound": 10, "upper_bound": 19}]},
        configuration_space={
            "machine_configurations": [{"cori": {"haswell": {"nodes": 2}}}],
            "software_configurations": [{"gcc": {"version_from": [9, 5], "version_to": [10, 2]}}],
        },
    )
    query_s = time.perf_counter() - start
    expected = [
        r
        for r in records
        if 10 <= r.task_parameter["t"] <= 19
        and r.machine_configuration["haswell"]["nodes"] == 2
        and [9, 5] <= r.software_configuration["gcc"]["version_split"][:2] <= [10, 2]
    ]
    assert sorted(r.uid for r in got) == sorted(r.uid for r in expected)
    message = (
        f"crowd bulk upload: {n} records in {upload_s:.2f} s = {n / upload_s:,.0f} records/s; "
        f"re-upload of 5000 duplicates {reupload_s:.2f} s; filtered query of {n} -> {len(got)} "
        f"records in {query_s * 1000:.1f} ms"
    )
    log.info(message)
    with capsys.disabled():
        print("\n" + message)


def test_a_bad_record_stops_the_whole_upload(repo: CrowdRepository, key: str) -> None:
    records: list[Any] = [_rec(float(t)) for t in range(5)] + [{"task_parameter": {"t": 1}, "uid": ""}]
    with pytest.raises(InvalidInputError) as err:
        repo.upload(key, "demo", records)
    assert err.value.field == "records[5].uid"
    assert repo.query_function_evaluations(key, "demo") == []
    not_records: Any = "not records"  # neither a record nor a list of them
    with pytest.raises(InvalidInputError) as err:
        repo.upload(key, "demo", not_records)
    assert err.value.field == "records"
