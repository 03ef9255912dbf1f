"""Crowd repository access control on a real mongod: who sees what, keys, injection attempts."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from raytuner.crowd import AccessDenied, CrowdRepository, Unauthenticated, visibility_filter
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord

PROBLEM = "matrix"


def _record(t: float, label: str) -> FunctionEvaluation:
    return FunctionEvaluation.create(
        {"t": t},
        {"x": 0.5},
        {"y": t},
        additional_output={"label": label},
        machine_configuration={"machine_name": "cori", "haswell": {"nodes": 1, "cores": 32}},
    )


USERS = {"alice": ("hpc",), "bob": ("hpc", "ml"), "carol": ("ml",), "dave": ()}
# label -> (owner, access, shared users, shared groups)
UPLOADS = {
    "pub": ("alice", "public", (), ()),
    "reg": ("alice", "registered", (), ()),
    "priv_a": ("alice", "private", (), ()),
    "share_carol": ("alice", "shared", ("carol",), ()),
    "share_ml": ("alice", "shared", (), ("ml",)),
    "priv_b": ("bob", "private", (), ()),
    "share_dave_hpc": ("bob", "shared", ("dave",), ("hpc",)),
}


def _may_see(user: str, label: str) -> bool:
    owner, access, users, groups = UPLOADS[label]
    if access in ("public", "registered") or owner == user:
        return True
    return access == "shared" and (user in users or bool(set(groups) & set(USERS[user])))


@pytest.fixture
def world(repo: CrowdRepository) -> dict[str, str]:
    keys = {}
    for name, groups in USERS.items():
        repo.add_user(name, f"{name}@example.org", groups)
        keys[name] = repo.create_key(name)
    for i, (label, (owner, access, users, groups)) in enumerate(UPLOADS.items()):
        result = repo.upload(
            keys[owner],
            PROBLEM,
            [_record(float(i), label), _record(float(i) + 0.5, label)],
            access=access,
            shared_with_users=users,
            shared_with_groups=groups,
        )
        assert result.inserted == 2
        repo.upload(
            keys[owner],
            PROBLEM,
            SurrogateModelRecord(modeler=label),
            access=access,
            shared_with_users=users,
            shared_with_groups=groups,
            kind="surrogate_model",
        )
    return keys


QUERIES: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = [
    (None, None),
    ({"input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 100}]}, None),
    (None, {"machine_configurations": [{"cori": {"haswell": {"nodes": 1, "cores": 32}}}]}),
    (None, {"user_configurations": ["alice"]}),
    (None, {"user_configurations": ["bob@example.org", "carol"]}),
]


def test_access_matrix(repo: CrowdRepository, world: dict[str, str]) -> None:
    everything = set(UPLOADS)
    for user, (space, config) in itertools.product(USERS, QUERIES):
        got = repo.query_function_evaluations(world[user], PROBLEM, problem_space=space, configuration_space=config)
        labels = [r.additional_output["label"] for r in got]
        owners = (
            None
            if config is None or "user_configurations" not in config
            else ({"alice"} if config["user_configurations"] == ["alice"] else {"bob", "carol"})
        )
        expected = {
            label for label in everything if _may_see(user, label) and (owners is None or UPLOADS[label][0] in owners)
        }
        assert sorted(labels) == sorted(2 * list(expected)), (user, space, config)
        for label in labels:  # never a private record of someone else
            owner, access, _, _ = UPLOADS[label]
            assert access != "private" or owner == user
        models = repo.query_surrogate_models(
            world[user],
            PROBLEM,
            configuration_space=config and {k: v for k, v in config.items() if k == "user_configurations"},
        )
        model_labels = {m.modeler for m in models}
        assert model_labels == expected, (user, config)


def test_anonymous_filter_is_public_only(repo: CrowdRepository, world: dict[str, str]) -> None:
    labels = {d["record"]["additional_output"]["label"] for d in repo.func_eval.find(visibility_filter(None))}
    assert labels == {"pub"}


@pytest.mark.parametrize("key", [None, "", "nonsense", {"$gt": ""}, ["rt_"], "rt_" + "0" * 16 + "_" + "A" * 43])
def test_invalid_keys_are_unauthenticated(repo: CrowdRepository, world: dict[str, str], key: Any) -> None:
    with pytest.raises(Unauthenticated):
        repo.query_function_evaluations(key, PROBLEM)
    with pytest.raises(Unauthenticated):
        repo.upload(key, PROBLEM, _record(1.0, "x"))


def test_wrong_and_revoked_keys(repo: CrowdRepository, world: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = world["alice"]
    second = repo.create_key("alice")
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    with pytest.raises(Unauthenticated) as err:
        repo.authenticate(wrong)
    assert key[20:] not in str(err.value) and wrong[20:] not in str(err.value)
    assert repo.authenticate(second).username == "alice"
    key_id = key.split("_")[1]
    with pytest.raises(AccessDenied):
        repo.revoke_key(key_id, api_key=world["bob"])
    repo.revoke_key(key_id, api_key=second)
    with pytest.raises(Unauthenticated):
        repo.query_function_evaluations(key, PROBLEM)
    assert repo.authenticate(second).username == "alice"  # the other key still works
    assert [k.revoked for k in repo.list_keys("alice")] == [True, False]
    # keys and secrets never logged (not even pymongo's DEBUG command log) nor stored in clear
    logged = caplog.text
    stored = str(list(repo.api_keys.find()))
    for k in (key, second, wrong, *world.values()):
        secret = k.split("_", 2)[2]
        assert secret not in logged and secret not in stored


BAD_PROBLEM_SPACES = [
    ({"$where": "sleep(1000)"}, "problem_space.$where"),
    ({"input_space": [{"name": "$where", "lower_bound": 0, "upper_bound": 1}]}, "problem_space.input_space[0].name"),
    ({"input_space": [{"name": "t.x"}]}, "problem_space.input_space[0].name"),
    ({"input_space": [{"name": {"$gt": ""}}]}, "problem_space.input_space[0].name"),
    ({"input_space": [{"name": "t", "lower_bound": {"$gt": ""}}]}, "problem_space.input_space[0].lower_bound"),
    ({"input_space": [{"name": "t", "upper_bound": "$x"}]}, "problem_space.input_space[0].upper_bound"),
    ({"input_space": [{"name": "t", "categories": [{"$ne": 1}]}]}, "problem_space.input_space[0].categories[0]"),
    ({"input_space": [{"name": "t", "categories": ["$where"]}]}, "problem_space.input_space[0].categories[0]"),
    ({"input_space": [{"name": "t", "$where": 1}]}, "problem_space.input_space[0].$where"),
    ({"input_space": {"$gt": ""}}, "problem_space.input_space"),
    ({"parameter_space": [{"name": "x", "type": {"$ne": "real"}}]}, "problem_space.parameter_space[0].type"),
    ("$where", "problem_space"),
]

BAD_CONFIGURATION_SPACES = [
    ({"$where": 1}, "configuration_space.$where"),
    ({"user_configurations": [{"$gt": ""}]}, "configuration_space.user_configurations[0]"),
    ({"user_configurations": ["$ne"]}, "configuration_space.user_configurations[0]"),
    ({"user_configurations": {"$ne": None}}, "configuration_space.user_configurations"),
    ({"machine_configurations": [{"$where": {}}]}, "configuration_space.machine_configurations[0]"),
    ({"machine_configurations": [{"cori": {"$gt": {}}}]}, "configuration_space.machine_configurations[0]"),
    ({"machine_configurations": [{"cori": {"hasw.ell": {}}}]}, "configuration_space.machine_configurations[0]"),
    (
        {"machine_configurations": [{"cori": {"haswell": {"nodes": {"$gt": 0}}}}]},
        "configuration_space.machine_configurations[0].cori.haswell.nodes",
    ),
    (
        {"machine_configurations": [{"cori": {"haswell": {"$where": 1}}}]},
        "configuration_space.machine_configurations[0].cori.haswell.$where",
    ),
    (
        {"software_configurations": [{"gcc": {"version_from": {"$gt": ""}}}]},
        "configuration_space.software_configurations[0].gcc.version_from",
    ),
    (
        {"software_configurations": [{"gcc": {"$where": 1}}]},
        "configuration_space.software_configurations[0].gcc.$where",
    ),
    ({"software_configurations": [{"$gcc": {}}]}, "configuration_space.software_configurations[0]"),
]


@pytest.mark.parametrize(("space", "field"), BAD_PROBLEM_SPACES)
def test_problem_space_injection_rejected(repo: CrowdRepository, world: dict[str, str], space: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        repo.query_function_evaluations(world["dave"], PROBLEM, problem_space=space)
    assert err.value.field.startswith(field), err.value


@pytest.mark.parametrize(("space", "field"), BAD_CONFIGURATION_SPACES)
def test_configuration_space_injection_rejected(
    repo: CrowdRepository, world: dict[str, str], space: Any, field: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        repo.query_function_evaluations(world["dave"], PROBLEM, configuration_space=space)
    assert err.value.field.startswith(field), err.value


@pytest.mark.parametrize("name", [{"$gt": ""}, "$where", "a:b", "", None])
def test_problem_name_injection_rejected(repo: CrowdRepository, world: dict[str, str], name: Any) -> None:
    with pytest.raises(InvalidInputError) as err:
        repo.query_function_evaluations(world["dave"], name)
    assert err.value.field == "tuning_problem_name"


def test_problem_name_with_dot_is_a_plain_value(repo: CrowdRepository, world: dict[str, str]) -> None:
    assert repo.query_function_evaluations(world["dave"], "a.b") == []  # a valid name, no other problem's data


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"access": {"$ne": "private"}}, "access"),
        ({"access": "secret"}, "access"),
        ({"access": "shared"}, "shared_with_users"),
        ({"access": "public", "shared_with_users": ["bob"]}, "shared_with_users"),
        ({"access": "shared", "shared_with_users": [{"$gt": ""}]}, "shared_with_users[0]"),
        ({"access": "shared", "shared_with_users": "bob"}, "shared_with_users"),
        ({"access": "shared", "shared_with_users": ["nobody"]}, "shared_with_users"),
        ({"access": "shared", "shared_with_groups": ["$admins"]}, "shared_with_groups[0]"),
    ],
)
def test_upload_access_spec_validated(
    repo: CrowdRepository, world: dict[str, str], kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        repo.upload(world["alice"], PROBLEM, _record(9.0, "bad"), **kwargs)
    assert err.value.field == field
    if kwargs["access"] == "secret":
        assert err.value.allowed == ["public", "registered", "private", "shared"]


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"task_parameter": {"$where": 1}, "tuning_parameter": {"x": 1}}, "records[0].task_parameter.<name>"),
        ({"task_parameter": {"t": 1}, "tuning_parameter": {"a.b": 1}}, "records[0].tuning_parameter.<name>"),
        ({"task_parameter": "t", "tuning_parameter": {}}, "records[0].task_parameter"),
        ({"task_parameter": {"t": 1}, "$where": "1"}, "records[0].<key>"),
    ],
)
def test_upload_records_validated(
    repo: CrowdRepository, world: dict[str, str], record: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        repo.upload(world["alice"], PROBLEM, [record])
    assert err.value.field == field


def test_limit_validated(repo: CrowdRepository, world: dict[str, str]) -> None:
    assert len(repo.query_function_evaluations(world["dave"], PROBLEM, limit=3)) == 3
    bad: Any  # each of the wrong types the repository refuses
    for bad in (0, "10", {"$gt": 0}, True):
        with pytest.raises(InvalidInputError) as err:
            repo.query_function_evaluations(world["dave"], PROBLEM, limit=bad)
        assert err.value.field == "limit"


def test_key_lifecycle_never_logs_the_key(repo: CrowdRepository, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # pymongo's command log included
    repo.add_user("erin", "erin@example.org")
    key = repo.create_key("erin")
    repo.upload(key, PROBLEM, _record(1.0, "e"), access="private")
    assert len(repo.query_function_evaluations(key, PROBLEM)) == 1
    with pytest.raises(Unauthenticated) as err:
        repo.authenticate(key[:-2] + ("zz" if not key.endswith("zz") else "yy"))  # surely not the key
    repo.revoke_key(key.split("_")[1])
    with pytest.raises(Unauthenticated):
        repo.authenticate(key)
    secret = key.split("_", 2)[2]
    assert secret not in caplog.text and secret[:-2] not in str(err.value)
    assert key.split("_")[1] in caplog.text  # the key id is what the log names
