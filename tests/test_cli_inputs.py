"""Every ``raytuner`` command refuses a bad input file with exit status 2 and one line, and changes nothing.

Property test (Hypothesis): random bytes, truncated JSON and valid JSON of
wrong shapes are fed to ``history show``, ``history import`` (into a real
JsonStore directory that already holds records), ``crowd upload`` and
``session create --meta``. Each must exit 2 with exactly one line on stderr
(no traceback) and nothing on stdout; no file under the store directory may
change (names and bytes); and ``crowd upload`` / ``session create`` must
refuse the file before any connection is made: their ``--server`` is a real
loopback socket that listens, and no connection may reach it.

The commands run in-process through click's ``CliRunner`` (the real command
code, with a separate stderr, as click >= 8.2 gives it); two subprocess runs
of the installed ``raytuner`` entry point show the real process does the same.
Examples are derandomized and bounded (no database, no deadline), so a loaded
machine cannot make the test fail by chance.
"""

from __future__ import annotations

import copy
import hashlib
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raytuner.cli import main
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, SurrogateModelRecord

SCRIPT = Path(sys.executable).with_name("raytuner")
RAYTUNER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "raytuner.cli"]

# -- valid inputs, the starting points of the bad ones --------------------------------------------------

HISTORY: dict[str, Any] = HistoryDocument(
    tuning_problem_name="cli_inputs",
    func_eval=[FunctionEvaluation.create({"t": 1}, {"x": 0.5, "alg": "lu"}, {"y": 2.0})],
    surrogate_model=[SurrogateModelRecord.model_validate({"task_parameters": [[1]]})],
).to_dict()
META: dict[str, Any] = {
    "tuning_problem_name": "cli_inputs",
    "problem_space": {
        "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr"]},
        ],
        "output_space": [{"name": "y", "type": "real"}],
    },
}

# -- engines -----------------------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
LISTS = st.lists(JSON_VALUES, max_size=3)
OBJECTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=3)
NON_STRING_SCALARS = (
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False)
)
NOT_OBJECT = SCALARS | LISTS
NOT_LIST = SCALARS | OBJECTS
NOT_STRING = NON_STRING_SCALARS | LISTS | OBJECTS | st.just("")
NOT_NUMBER = st.lists(SCALARS, max_size=2) | st.dictionaries(st.text(max_size=4), SCALARS, max_size=2)

Path_ = tuple[Any, ...]  # a path into a JSON value: keys and list indices


def _replaced(document: dict[str, Any], path: Path_, value: Any) -> Any:
    out = copy.deepcopy(document)
    *parents, last = path
    target = out
    for part in parents:
        target = target[part]
    target[last] = value
    return out


def _without(document: dict[str, Any], path: Path_) -> Any:
    out = copy.deepcopy(document)
    *parents, last = path
    target = out
    for part in parents:
        target = target[part]
    del target[last]
    return out


def wrong_shapes(
    valid: dict[str, Any], wrong: list[tuple[Path_, st.SearchStrategy[Any]]], required: list[Path_]
) -> st.SearchStrategy[Any]:
    """Valid JSON of the wrong shape: not an object, a field of a wrong type, a required field missing."""
    replaced = [st.builds(lambda v, p=path: _replaced(valid, p, v), values) for path, values in wrong]
    missing = [st.just(_without(valid, path)) for path in required]
    return st.one_of(NOT_OBJECT, *replaced, *missing)


def _record_fields(prefix: Path_) -> list[tuple[Path_, st.SearchStrategy[Any]]]:
    return (
        [(prefix, NOT_OBJECT)]
        + [
            ((*prefix, field), NOT_OBJECT)
            for field in ("task_parameter", "tuning_parameter", "evaluation_result", "machine_configuration")
        ]
        + [((*prefix, "uid"), NOT_STRING)]
    )


HISTORY_WRONG = [
    (("tuning_problem_name",), NOT_STRING),
    (("func_eval",), NOT_LIST),
    (("surrogate_model",), NOT_LIST),
    (("surrogate_model", 0), NOT_OBJECT),
    *_record_fields(("func_eval", 0)),
]
META_WRONG = [
    (("tuning_problem_name",), NOT_STRING),
    (("problem_space",), NOT_OBJECT),
    (("problem_space", "parameter_space", 0), NOT_OBJECT),
    (
        ("problem_space", "parameter_space", 0, "type"),
        st.text(max_size=8).filter(lambda t: t not in ("real", "integer", "categorical")),
    ),
    (("problem_space", "parameter_space", 0, "lower_bound"), NOT_NUMBER),
    (("problem_space", "parameter_space", 1, "categories"), NOT_LIST),
]


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False


def _dumps(value: Any) -> bytes:
    return json.dumps(value, indent=1).encode()


def bad_files(
    valid: dict[str, Any], wrong: list[tuple[Path_, st.SearchStrategy[Any]]], required: list[Path_]
) -> st.SearchStrategy[bytes]:
    """Random bytes (never a JSON object), truncated JSON (a proper prefix of a valid file) and wrong shapes."""
    text = _dumps(valid)
    return st.one_of(
        st.binary(max_size=300).filter(lambda b: not _is_json_object(b)),
        st.integers(0, len(text) - 1).map(lambda n: text[:n]),
        wrong_shapes(valid, wrong, required).map(_dumps),
    )


# a history without a name is fine for `crowd upload` (the file's name is the problem's name)
BAD_HISTORY = bad_files(HISTORY, HISTORY_WRONG, [("tuning_problem_name",)])
BAD_UPLOAD = bad_files(HISTORY, HISTORY_WRONG, [])
BAD_META = bad_files(
    META, META_WRONG, [("tuning_problem_name",), ("problem_space",), ("problem_space", "parameter_space", 0, "name")]
)

BOUNDED = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# -- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli_inputs")


@pytest.fixture(scope="module")
def store_dir(work: Path) -> Path:
    """A real JsonStore directory that already holds records (imported through the CLI)."""
    directory = work / "store"
    source = work / "good.json"
    source.write_bytes(_dumps(HISTORY))
    result = invoke(["history", "import", str(source), "--to", str(directory)])
    assert result.exit_code == 0, result.output
    assert fingerprint(directory)
    return directory


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[str, Callable[[], bool]]]:
    """A real loopback socket that listens: (its host:port, whether anything has connected to it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)

    def connected() -> bool:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    yield f"127.0.0.1:{sock.getsockname()[1]}", connected
    sock.close()


# -- helpers --------------------------------------------------------------------------------------------


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(
        main,
        args,
        env={
            "RAYTUNER_SERVER": None,
            "RAYTUNER_API_KEY": None,
            "RAYTUNER_CROWD_API_KEY": None,
            "RAYTUNER_TLS_CA": None,
        },
    )


def fingerprint(directory: Path) -> dict[str, str]:
    """Every file under ``directory``: its relative name and the SHA-256 of its bytes."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def assert_refused(result: Result, name: str) -> None:
    """Exit status 2, exactly one line on stderr that names the file, nothing on stdout, no traceback."""
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert name in lines[0], lines[0]
    assert "Traceback" not in result.output and result.stdout == "", result.output


def write(work: Path, data: bytes, name: str = "input.json") -> Path:
    path = work / name
    path.write_bytes(data)
    return path


# -- the property tests ---------------------------------------------------------------------------------


@BOUNDED
@given(data=BAD_HISTORY)
def test_history_show_refuses_bad_files(work: Path, data: bytes) -> None:
    path = write(work, data)
    assert_refused(invoke(["history", "show", str(path)]), path.name)


@BOUNDED
@given(data=BAD_HISTORY)
def test_history_import_refuses_bad_files_and_changes_nothing(work: Path, store_dir: Path, data: bytes) -> None:
    before = fingerprint(store_dir)
    path = write(work, data)
    assert_refused(invoke(["history", "import", str(path), "--to", str(store_dir)]), path.name)
    assert fingerprint(store_dir) == before


@BOUNDED
@given(data=BAD_UPLOAD)
def test_crowd_upload_refuses_bad_files_before_connecting(
    work: Path, listener: tuple[str, Callable[[], bool]], data: bytes
) -> None:
    address, connected = listener
    path = write(work, data)
    assert_refused(invoke(["crowd", "upload", str(path), "--server", address, "--api-key", "rt_x_y"]), path.name)
    assert not connected()


@BOUNDED
@given(data=BAD_META)
def test_session_create_refuses_bad_problem_files_before_connecting(
    work: Path, listener: tuple[str, Callable[[], bool]], data: bytes
) -> None:
    address, connected = listener
    path = write(work, data, "meta.json")
    assert_refused(
        invoke(
            [
                "session",
                "create",
                "--meta",
                str(path),
                "--engine",
                "random",
                "--server",
                address,
                "--api-key",
                "rt_x_y",
            ]
        ),
        path.name,
    )
    assert not connected()


# -- the starting points are valid, so what made the examples bad was the change --------------------------


def test_the_valid_starting_points_are_taken(work: Path, store_dir: Path) -> None:
    good = write(work, _dumps(HISTORY), "good.json")
    result = invoke(["history", "show", str(good), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["func_eval"] == 1, result.output
    before = fingerprint(store_dir)
    result = invoke(["history", "import", str(good), "--to", str(store_dir)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"imported 0 new evaluations and 0 new models of cli_inputs into {store_dir} (2 already in the store)"
    )
    assert fingerprint(store_dir) == before
    from raytuner.problem.meta import MetaDescription

    MetaDescription.parse(META)


# -- a directory, a missing file, a missing argument ------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["history", "show", "{path}"],
        ["history", "import", "{path}", "--to", "{store}"],
        ["crowd", "upload", "{path}", "--server", "{server}", "--api-key", "rt_x_y"],
        ["session", "create", "--meta", "{path}", "--engine", "random", "--server", "{server}"],
    ],
)
@pytest.mark.parametrize("kind", ["directory", "missing"])
def test_a_directory_or_a_missing_file_is_one_line(
    command: list[str], kind: str, work: Path, store_dir: Path, listener: tuple[str, Callable[[], bool]]
) -> None:
    address, connected = listener
    path = work / ("a_directory" if kind == "directory" else "no_such_file.json")
    if kind == "directory":
        path.mkdir(exist_ok=True)
    before = fingerprint(store_dir)
    args = [a.format(path=path, store=store_dir, server=address) for a in command]
    result = invoke(args)
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and path.name in lines[0], result.output
    assert fingerprint(store_dir) == before and not connected()


def test_usage_errors_are_one_line_too(store_dir: Path) -> None:
    for args in (
        ["history", "import"],
        ["history", "import", "x.json"],
        ["nope"],
        ["history", "show", "--bad"],
        ["history", "import", str(store_dir), "--to", str(store_dir)],
    ):
        result = invoke(args)
        lines = result.stderr.splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), (args, result.output)


def test_an_unreachable_server_is_one_line_with_status_1() -> None:
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        result = invoke(
            ["session", "list", "--server", f"127.0.0.1:{bound.getsockname()[1]}", "--timeout", "1", "--retry-for", "2"]
        )
    lines = result.stderr.splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "UNAVAILABLE" in lines[0] or "DEADLINE_EXCEEDED" in lines[0], lines


# -- the real process -------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["show wrong shape", "upload truncated"])
def test_the_installed_command_gives_one_line_and_status_2(
    case: str, work: Path, listener: tuple[str, Callable[[], bool]]
) -> None:
    address, connected = listener
    if case == "show wrong shape":
        path = write(work, _dumps({"tuning_problem_name": "p", "func_eval": [{"task_parameter": [1, 2]}]}), "w.json")
        args = ["history", "show", str(path)]
        expected = "w.json: func_eval[0].task_parameter"
    else:
        path = write(work, _dumps(HISTORY)[:40], "t.json")
        args = ["crowd", "upload", str(path), "--server", address, "--api-key", "rt_x_y"]
        expected = "t.json: not valid JSON"
    proc = subprocess.run([*RAYTUNER, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and expected in proc.stderr, proc.stderr
    assert not connected()


# -- a bug is still one line by default, with its traceback behind -v ------------------------------------


def test_a_bug_is_one_line_with_status_70_and_its_traceback_behind_v() -> None:
    @click.command("raise-a-bug")
    def broken() -> None:
        empty: dict[str, int] = {}
        empty["missing"]  # a real bug: a KeyError nobody meant

    main.add_command(broken)
    try:
        quiet = invoke(["raise-a-bug"])
        loud = invoke(["-v", "raise-a-bug"])
    finally:
        main.commands.pop("raise-a-bug")
    lines = quiet.stderr.splitlines()
    assert quiet.exit_code == 70 and len(lines) == 1 and "internal error: KeyError" in lines[0], quiet.output
    assert "run again with -v" in lines[0]
    assert loud.exit_code == 70 and "Traceback (most recent call last)" in loud.stderr, loud.output
    assert loud.stderr.splitlines()[-1].startswith("Error: internal error: KeyError")
