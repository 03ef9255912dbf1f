"""Ed25519 key pairs: the client signs each call, the server keeps public keys only (issue 23).

On a real mongod (the repository), a real gRPC server (CrowdClient, RemoteTuner) and the CLI:
a valid signature signs in; an expired, replayed, wrongly signed, wrong-method or revoked one
does not; API keys keep working beside key pairs.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import SecretStr

from raytuner.cli import main
from raytuner.client.channel import ServiceError
from raytuner.client.crowd import CrowdClient, sync_store_for
from raytuner.client.remote import RemoteTuner
from raytuner.crowd import CrowdRepository, Unauthenticated
from raytuner.crowd.sync import CrowdSyncStore
from raytuner.errors import InvalidInputError
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation
from raytuner.protocol import METADATA_KEY
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.signing import (
    DASHBOARD_SIGN_IN,
    WINDOW_SECONDS,
    Signer,
    generate_key_pair,
    key_id_of,
    parse_signed,
    public_key_text,
    verify,
)

PROBLEM = "signed"
SPACE = {
    "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
    "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    "output_space": [{"name": "y", "type": "real"}],
}


def _records(n: int) -> list[FunctionEvaluation]:
    return [FunctionEvaluation.create({"t": 3}, {"x": i / n}, {"y": (i / n - 0.3) ** 2}) for i in range(n)]


def _signer() -> Signer:
    return Signer.from_pem(generate_key_pair()[0])


# -- the signature scheme alone ------------------------------------------------------------------------


def test_a_signature_verifies_for_its_key_and_method_only() -> None:
    signer, other = _signer(), _signer()
    signed = parse_signed(signer.credential("upload"))
    assert signed is not None and signed.key_id == signer.key_id == key_id_of(signer.public_key)
    assert verify(signer.public_key, signed, "upload")
    assert not verify(signer.public_key, signed, "query_function_evaluations")
    assert not verify(other.public_key, signed, "upload")
    forged = parse_signed(other.credential("upload").replace(other.key_id, signer.key_id))  # other's signature
    assert forged is not None and not verify(signer.public_key, forged, "upload")
    assert signer.credential("upload") != signer.credential("upload")  # a fresh nonce each time


def test_keys_in_every_accepted_form_and_refusals_naming_the_field(tmp_path: Path) -> None:
    pem, public = generate_key_pair()
    signer = Signer.from_pem(pem)
    block = (
        signer._private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    assert public_key_text(block) == public_key_text(f"  {public}\n") == public == signer.public_key
    for bad in ("x" * 43 + "=", 42, public[:-1]):
        with pytest.raises(InvalidInputError, match="^public_key: "):
            public_key_text(bad)
    ec_key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(InvalidInputError, match="^private_key: a .*not an Ed25519 key"):
        Signer.from_pem(ec_key)
    with pytest.raises(InvalidInputError, match="^private_key: not an unencrypted PEM"):
        Signer.from_pem(b"garbage")
    with pytest.raises(InvalidInputError, match="^private_key: cannot read"):
        Signer.from_file(tmp_path / "missing.pem")
    with pytest.raises(InvalidInputError, match="^method: "):
        signer.credential("Upload; drop")
    with pytest.raises(InvalidInputError, match="^method: "):
        signer.credential("upload\n")
    identity = "AQ" + "A" * 41  # the identity point: anyone can sign for it
    with pytest.raises(InvalidInputError, match="^public_key: a weak Ed25519 key"):
        public_key_text(identity)
    with pytest.raises(InvalidInputError, match="^api_key: a SecretStr"):
        CrowdClient("127.0.0.1:1", SecretStr("rt_x"))  # type: ignore[arg-type]  # the wrong type is what the test gives


# -- the repository on a real mongod ---------------------------------------------------------------------


def test_valid_expired_replayed_wrong_and_revoked_signatures(repo: CrowdRepository) -> None:
    repo.add_user("alice", "alice@example.org")
    signer = _signer()
    key_id = repo.register_public_key("alice", signer.public_key)
    assert key_id == signer.key_id
    stored = repo.api_keys.find_one({"_id": key_id})
    assert stored is not None and set(stored) == {"_id", "username", "kind", "public_key", "created", "revoked"}
    credential = signer.credential("upload")
    assert repo.authenticate(credential, "upload").username == "alice"  # valid
    with pytest.raises(Unauthenticated):
        repo.authenticate(credential, "upload")  # replayed
    now = time.time()
    for when in (now - 2 * WINDOW_SECONDS, now + 2 * WINDOW_SECONDS):  # expired, or from the future
        with pytest.raises(Unauthenticated):
            repo.authenticate(signer.credential("upload", now=when), "upload")
    assert repo.authenticate(signer.credential("upload", now=now - WINDOW_SECONDS / 2), "upload").username == "alice"
    with pytest.raises(Unauthenticated):
        repo.authenticate(signer.credential("query_function_evaluations"), "upload")  # signed for another method
    with pytest.raises(Unauthenticated):
        repo.authenticate(signer.credential("upload"))  # where only keys are taken
    intruder = _signer()
    with pytest.raises(Unauthenticated):  # wrong key, right key id
        repo.authenticate(intruder.credential("upload").replace(intruder.key_id, key_id), "upload")
    with pytest.raises(Unauthenticated):  # an unregistered key
        repo.authenticate(intruder.credential("upload"), "upload")
    with pytest.raises(Unauthenticated):  # mangled
        repo.authenticate(credential[:-3] + "!!!", "upload")
    repo.revoke_key(key_id)
    with pytest.raises(Unauthenticated):  # revoked
        repo.authenticate(signer.credential("upload"), "upload")
    with pytest.raises(Unauthenticated):
        repo.user_of_key(key_id)


def test_api_keys_and_key_pairs_side_by_side(repo: CrowdRepository) -> None:
    repo.add_user("alice", "alice@example.org")
    api_key = repo.create_key("alice")
    signer = _signer()
    key_id = repo.register_public_key("alice", signer.public_key)
    assert sorted((k.kind, k.revoked) for k in repo.list_keys("alice")) == [("api_key", False), ("ed25519", False)]
    assert repo.authenticate(api_key, "upload").username == "alice"
    assert repo.authenticate(api_key).username == "alice"
    assert repo.user_of_key(key_id).username == repo.user_of_key(api_key.split("_")[1]).username == "alice"
    with pytest.raises(Unauthenticated):  # a key id of a public key is no API key, whatever the secret
        repo.authenticate(f"rt_{key_id}_{'A' * 43}")
    with pytest.raises(InvalidInputError, match="^public_key: already registered"):
        repo.register_public_key("alice", signer.public_key)
    with pytest.raises(InvalidInputError, match="^username: no user 'zed'"):
        repo.register_public_key("zed", _signer().public_key)
    with pytest.raises(InvalidInputError, match="^public_key: "):
        repo.register_public_key("alice", "not a key")
    with pytest.raises(InvalidInputError, match="^public_key: a weak"):
        repo.register_public_key("alice", "AQ" + "A" * 41)
    assert repo.api_keys.count_documents({}) == 2  # nothing written by a refusal
    assert repo.signatures.index_information()["expiry"]["expireAfterSeconds"] > 2 * WINDOW_SECONDS


# -- over gRPC: the crowd's client, the tuning service's client and the CLI --------------------------------


def test_the_clients_sign_every_call(crowd: tuple[Any, CrowdRepository, str], tmp_path: Path) -> None:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org")
    repository.add_user("bob", "bob@example.org")
    signer = _signer()
    repository.register_public_key("alice", signer.public_key)
    with CrowdClient(server.address, signer, timeout=60) as client:
        assert client.upload(PROBLEM, _records(12), access="private") == (12, 0)
        assert len(client.query_function_evaluations(PROBLEM)) == 12
        model = client.query_surrogate_model(PROBLEM, SPACE)
        remote = client.query_predict_output(PROBLEM, SPACE, [{"x": 0.3}], task={"t": 3})
        assert remote[0]["mean"] == pytest.approx(float(model.predict([{"x": 0.3}], task={"t": 3})[0][0]), abs=1e-6)
    with CrowdClient(server.address, repository.create_key("bob")) as client:
        assert client.query_function_evaluations(PROBLEM) == []  # alice's private records
    meta = MetaDescription.parse({"tuning_problem_name": PROBLEM, "problem_space": SPACE})
    with RemoteTuner(server.address, signer, timeout=20) as tuner:  # the tuning service too
        tuner.create_session(meta, "random", tasks=[{"t": 2}], seed=1)
        assert tuner.run(lambda config, task, fidelity: {"y": config["x"]}, max_trials=2) == 2
        assert [s["evaluations"] for s in tuner.sessions()] == [2]
    with grpc.insecure_channel(server.address) as channel:  # the service refuses a replay
        stub, request = pb_grpc.TuningServiceStub(channel), pb.ListSessionsRequest()
        once = ((METADATA_KEY, signer.credential("list_sessions")),)
        assert len(stub.ListSessions(request, metadata=once, timeout=20).sessions) == 1
        for metadata in (once, ((METADATA_KEY, signer.credential("get_session")),)):  # again; another method
            with pytest.raises(grpc.RpcError) as refused:
                stub.ListSessions(request, metadata=metadata, timeout=20)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "check the clock" in refused.value.details()
    synced = sync_store_for(
        MetaDescription.parse({"tuning_problem_name": "synced", "problem_space": SPACE, "sync_crowd_repo": "yes"}),
        tmp_path / "history",
        server=server.address,
        credential=signer,
        access="private",
    )
    assert isinstance(synced, CrowdSyncStore)
    synced.append("synced", _records(1)[0])
    assert synced.unsent == 0 and len(repository.evaluations_for(repository.get_user("alice"), "synced")) == 1
    repository.revoke_key(signer.key_id)
    with CrowdClient(server.address, signer, retries=0) as client:
        with pytest.raises(ServiceError) as info:
            client.query_function_evaluations(PROBLEM)
    assert info.value.code == "UNAUTHENTICATED"


def test_the_key_pair_commands(crowd: tuple[Any, CrowdRepository, str], tmp_path: Path) -> None:
    server, repository, uri = crowd
    repository.add_user("carol", "carol@example.org")
    runner = CliRunner()
    env: dict[str, str | None] = {
        "RAYTUNER_CROWD_MONGODB": uri,
        "RAYTUNER_SERVER": server.address,
        "RAYTUNER_CROWD_API_KEY": None,
        "RAYTUNER_CROWD_PRIVATE_KEY": None,
    }

    def run(*args: str, code: int = 0, **more: str | None) -> str:
        result = runner.invoke(main, ["crowd", *args], env={**env, **more})
        assert result.exit_code == code, result.output
        return str(result.output)

    private = tmp_path / "carol.pem"
    out = run("keys", "generate", "--out", str(private))
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    public = next(line.split()[-1] for line in out.splitlines() if line.startswith("public key:"))
    assert "PRIVATE" not in out and public == Signer.from_file(private).public_key
    assert "exists" in run("keys", "generate", "--out", str(private), code=2)  # never overwritten
    (tmp_path / "carol.pub").write_text(public + "\n")
    key_id = run("keys", "register", "--username", "carol", "--public-key", f"@{tmp_path / 'carol.pub'}").strip()
    assert key_id == key_id_of(public)
    assert "ed25519" in run("keys", "list", "--username", "carol")
    history = tmp_path / f"{PROBLEM}.json"
    history.write_text(json.dumps({"func_eval": [r.to_dict() for r in _records(5)]}))
    assert "5 records stored" in run("upload", str(history), RAYTUNER_CROWD_PRIVATE_KEY=str(private))
    assert len(json.loads(run("query", "--problem", PROBLEM, "--json", "--private-key", str(private)))) == 5
    assert "give one of --api-key" in run(
        "query", "--problem", PROBLEM, "--private-key", str(private), "--api-key", "rt_x", code=2
    )
    assert "give one of --api-key" in run("query", "--problem", PROBLEM, code=2)
    stale = "rt_" + "0" * 16 + "_" + "A" * 43  # an API key in the environment, a key file typed
    assert (
        len(
            json.loads(
                run(
                    "query", "--problem", PROBLEM, "--json", "--private-key", str(private), RAYTUNER_CROWD_API_KEY=stale
                )
            )
        )
        == 5
    )
    assert "cannot write" in run("keys", "generate", "--out", str(tmp_path / "no" / "such.pem"), code=2)
    token = run("keys", "token", "--private-key", str(private)).splitlines()[0]
    assert repository.authenticate(token, DASHBOARD_SIGN_IN).username == "carol"
