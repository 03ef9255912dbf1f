"""GPTune interoperability: every history schema reads; what we write, GPTune's reader loads.

``gptune_load`` below re-implements the key accesses of GPTune's reader
(``HistoryDB.load_history_func_eval``, ``check_load_deps``,
``search_func_eval_task_id``, ``check_surrogate_model_exact_match`` and the
model loaders' ``modeler`` / ``objective_id`` / ``model_stats`` reads, from
gptune/GPTune ``GPTune/database.py``): a key GPTune reads and we did not
write raises ``KeyError`` here as it does there, and a null output among the
records it keeps ends it (``SystemExit``) as GPTune's ``exit()`` does.
``tests/test_gptune_reader_tool.py`` runs GPTune's own code on the same files.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from record_helpers import known, provenance
from repo_data import GPTUNE_DEMO

from raytuner.cli import main
from raytuner.engines import MLA, GPTuneBand
from raytuner.errors import InvalidInputError
from raytuner.models import GPTUNE_LCM, LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore, read_history_file, write_history_file
from raytuner.store.gptune_file import parse_history
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_fidelity

DATA = GPTUNE_DEMO.parent
FILES = {"GPTune-Demo.json": (1, 70, 35), "hypre-2021.json": (4, 10, 5), "scalapack-pdqrdriver-2021.json": (3, 5, 0)}


def _schema2() -> dict[str, Any]:
    """GPTune's 2021 shape (``model_data`` with ``problem_space``, ``func_eval`` uids, ``objective_id``),
    made from ``GPTune-Demo.json``: neither 2021 file in ``tests/data/gptune`` has models in that shape."""
    data = json.loads((DATA / "GPTune-Demo.json").read_text())
    models = []
    for m in data.pop("surrogate_model"):
        models.append(
            {
                "hyperparameters": [0.5, 1.0, 1e-3],
                "model_stats": {"neg_log_likelihood": 3.0},
                "func_eval": m["function_evaluations"],
                "task_parameters": m["task_parameters"],
                "problem_space": {
                    "input_space": [{k: v for k, v in e.items() if k != "name"} for e in m["input_space"]],
                    "parameter_space": m["parameter_space"],
                    "output_space": m["output_space"],
                },
                "modeler": "Model_LCM",
                "objective_id": 0,
                "time": m["time"],
                "uid": m["uid"],
            }
        )
    data.pop("tuning_problem_category")
    return {**data, "model_data": models}


# -- reading every schema ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_schema_file_reads_whole_and_round_trips(name: str, tmp_path: Path) -> None:
    schema, evaluations, models = FILES[name]
    document = read_history_file(DATA / name)
    assert (document.read_report.schema, len(document.func_eval), len(document.surrogate_model)) == (
        schema,
        evaluations,
        models,
    )
    assert document.read_report.skipped == []
    assert all(r.status == "ok" and r.evaluation_result and r.task_parameter for r in document.func_eval)
    assert all("machine_name" in r.machine_configuration for r in document.func_eval)
    # read -> import -> export -> read again: the same evaluations and models
    with JsonStore(tmp_path / "store") as store:
        store.import_document(document)
        exported = store.export_document(document.tuning_problem_name)
    write_history_file(tmp_path / "out.json", exported)
    again = read_history_file(tmp_path / "out.json")
    assert again.read_report.schema == 1
    assert [r.to_dict() for r in again.func_eval] == [r.to_dict() for r in document.func_eval]
    assert [m.to_dict() for m in again.surrogate_model] == [m.to_dict() for m in document.surrogate_model]


def test_schema_4_is_mapped_field_by_field() -> None:
    document = read_history_file(DATA / "hypre-2021.json")
    raw = json.loads((DATA / "hypre-2021.json").read_text())
    first, record = raw["func_eval"][0], document.func_eval[0]
    assert record.uid == first["uid"] and record.task_parameter == first["I"]
    assert record.tuning_parameter["Px"] == 3 and record.tuning_parameter["strong_threshold"] == pytest.approx(0.25)
    assert record.evaluation_result == first["O"]
    assert record.machine_configuration == {"machine_name": "cori", "haswell": {"nodes": 1, "cores": 32}}
    assert record.time.tm_year == 2021
    assert any("inference" in note for note in document.read_report.notes)
    model = document.surrogate_model[0]
    assert model.function_evaluations == raw["model_data"][0]["func_eval"]
    assert model.hyperparameters == raw["model_data"][0]["hyperparameters"]
    assert [e["name"] for e in model.parameter_space] == list(first["P"])  # named from the records' order
    assert model.objective == {"objective_id": 0, "name": "r"}


def _hypre_problem() -> dict[str, Any]:
    raw = json.loads((DATA / "hypre-2021.json").read_text())
    params = [
        {"name": k, "type": "real" if "." in v else "integer", "lower_bound": 0, "upper_bound": 1e6}
        for k, v in raw["func_eval"][0]["P"].items()
    ]
    params = [
        p
        if p["name"] != "coarsen_type"
        else {"name": "coarsen_type", "type": "categorical", "categories": ["0", "1", "2"]}
        for p in params
    ]
    return {
        "input_space": [
            {"name": n, "type": "integer", "lower_bound": 0, "upper_bound": 1000} for n in ("nx", "ny", "nz")
        ],
        "parameter_space": params,
        "output_space": [{"name": "r"}],
    }


def test_schema_4_strings_follow_the_problems_types_when_given() -> None:
    document = read_history_file(DATA / "hypre-2021.json", problem=ProblemSpace.parse(_hypre_problem()))
    values = document.func_eval[0].tuning_parameter
    assert values["coarsen_type"] == "1" and values["Px"] == 3 and isinstance(values["trunc_factor"], float)
    assert document.read_report.notes == []


def test_schema_3_maps_evaluated_result_and_the_old_machine_shape() -> None:
    document = read_history_file(DATA / "scalapack-pdqrdriver-2021.json")
    record = document.func_eval[0]
    assert record.evaluation_result == {"r": 18.5114}
    assert record.machine_configuration == {"machine_name": "cori1", "haswell": {"nodes": 4, "cores": 32}}
    assert record.software_configuration["openmpi"]["version_split"] == [4, 0, 1]


def test_schema_2_keeps_its_models_through_import_and_export(tmp_path: Path) -> None:
    document = parse_history(_schema2())
    assert document.read_report.schema == 2 and len(document.surrogate_model) == 35
    model = document.surrogate_model[0]
    assert model.input_space[0]["name"] == "t" and known(model.objective)["objective_id"] == 0
    assert model.function_evaluations
    with JsonStore(tmp_path) as store:
        store.import_document(document)
        assert len(store.models("GPTune-Demo")) == 35


def test_what_is_no_record_is_skipped_and_said_and_a_non_history_is_one_line(tmp_path: Path) -> None:
    data = json.loads((DATA / "scalapack-pdqrdriver-2021.json").read_text())
    data["func_eval"].append("garbage")
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(data))
    document = read_history_file(path)
    assert len(document.func_eval) == 5 and document.read_report.skipped == ["func_eval[5]: a str, not a record object"]
    shown = CliRunner().invoke(main, ["history", "show", str(path)])
    assert shown.exit_code == 0 and "func_eval[5]: a str" in shown.output and "schema: 3" in shown.output
    assert "task: " in shown.output
    (tmp_path / "perf.json").write_text(json.dumps({"name": "x", "perf_data": []}))
    with pytest.raises(InvalidInputError, match="func_eval: missing"):
        read_history_file(tmp_path / "perf.json")
    refused = CliRunner().invoke(main, ["history", "show", str(tmp_path / "perf.json")])
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    assert "func_eval" in refused.output and "Traceback" not in refused.output


def test_a_store_directory_reads_an_older_gptune_file_without_writing(tmp_path: Path) -> None:
    target = tmp_path / "hypre.json"
    target.write_bytes((DATA / "hypre-2021.json").read_bytes())
    before = target.read_bytes()
    with JsonStore(tmp_path) as store:
        assert store.problems() == ["hypre"]
        assert len(store.evaluations("hypre")) == 10 and len(store.models("hypre")) == 5
    assert target.read_bytes() == before, "a read never writes"


# -- GPTune's reader over what we write --------------------------------------------------------------------------


def _version(split: list[int]) -> int:
    return int("".join(str(d) for d in split))


def _check_load_deps(func_eval: dict[str, Any], machines: dict[str, Any], software: dict[str, Any]) -> bool:
    """GPTune's ``check_load_deps``, key access for key access."""
    machine = func_eval["machine_configuration"]
    if "machine_name" not in machine:
        return False
    processors = [k for k in machine if k != "machine_name"]
    if machine["machine_name"] not in machines:
        return False
    for processor in processors:
        if processor not in machines[machine["machine_name"]]:
            return False
        for count in ("nodes", "cores"):
            value, allowed = machine[processor][count], machines[machine["machine_name"]][processor][count]
            if (isinstance(allowed, list) and value not in allowed) or (isinstance(allowed, int) and value != allowed):
                return False
    for name, rule in software.items():
        if name not in func_eval["software_configuration"]:
            return False
        value = _version(func_eval["software_configuration"][name]["version_split"])
        low = _version(rule.get("version_from", rule.get("version_split", [0])))
        high = _version(rule.get("version_to", rule.get("version_split", [9] * 9)))
        if not low <= value <= high:
            return False
    return True


def _gptune_space(space: list[dict[str, Any]], output: bool = False) -> list[dict[str, Any]]:
    """GPTune's ``problem_space_to_dict`` of the same problem declared as GPTune's demo driver does
    (``transform="normalize"`` for parameters, no transform, so ``identity``, for outputs)."""
    kinds = {"real": "real", "integer": "int"}
    return [
        {
            "name": p["name"],
            "transformer": "identity" if output else "normalize",
            "type": kinds[p.get("type", "real")],
            "lower_bound": p.get("lower_bound", float("-inf")),
            "upper_bound": p.get("upper_bound", float("inf")),
            "optimize": True,
        }
        for p in space
    ]


def gptune_load(
    history: dict[str, Any],
    problem: dict[str, Any],
    tasks: list[list[Any]],
    machine: dict[str, Any],
    load_check: bool = True,
) -> tuple[list[list[list[Any]]], list[list[list[Any]]], list[dict[str, Any]]]:
    """What GPTune loads from ``history``: parameters and outputs per task, and the matching LCM models.

    Records the load check rejects are passed over; a null output among the kept ones raises
    ``SystemExit``, as GPTune calls ``exit()`` there.
    """
    names = {key: [p["name"] for p in problem[key]] for key in ("input_space", "parameter_space")}
    outputs = [o["name"] for o in problem["output_space"]]
    machines = {
        machine["machine_name"]: {
            k: {"nodes": v["nodes"], "cores": v["cores"]} for k, v in machine.items() if k != "machine_name"
        }
    }
    P: list[list[list[Any]]] = [[] for _ in tasks]
    O: list[list[list[Any]]] = [[] for _ in tasks]
    for func_eval in history["func_eval"]:
        if load_check and ("machine_configuration" not in func_eval or not _check_load_deps(func_eval, machines, {})):
            continue
        task = next(
            (
                i
                for i, t in enumerate(tasks)
                if all(func_eval["task_parameter"][n] == v for n, v in zip(names["input_space"], t))
            ),
            -1,
        )
        if task == -1:
            continue
        P[task].append([float(func_eval["tuning_parameter"][n]) for n in names["parameter_space"]])
        O[task].append([func_eval["evaluation_result"][n] for n in outputs])
    if any(v is None for o in O for values in o for v in values):
        raise SystemExit("history data contains null function values")
    given = {
        key: _gptune_space(problem[key], output=key == "output_space")
        for key in ("input_space", "parameter_space", "output_space")
    }
    models = []
    for model in history["surrogate_model"]:
        match = model["task_parameters"] == tasks
        for key in ("input_space", "parameter_space", "output_space"):
            for entry in model[key]:
                other = next((g for g in given[key] if g["name"] == entry["name"]), None)
                match = (
                    match
                    and other is not None
                    and all(entry[k] == other[k] for k in ("type", "transformer", "lower_bound", "upper_bound"))
                )
        if (
            match
            and model["modeler"] == "Model_LCM"
            and model["objective_id"] == 0
            and model["objective"]["objective_id"] == 0
        ):
            assert model["model_stats"]["neg_log_likelihood"] == -model["log_likelihood"]
            assert all(isinstance(v, float) for v in model["hyperparameters"])
            models.append(model)
    return P, O, models


def _gptune_machine(machine: dict[str, Any]) -> dict[str, Any]:
    """The part of a session's machine GPTune's ``machine_configuration`` holds."""
    return {k: v for k, v in machine.items() if k == "machine_name" or isinstance(v, dict)}


def _mla_history(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 1.5}]
    # only GPTune's own model (an uncentred RBF LCM) is written in its form (others as raytuner_LCM)
    engine = MLA(
        problem, tasks, seed=0, n_initial=3, lcm=LCMOptions(n_starts=1, **GPTUNE_LCM), executor=InlineExecutor()
    )
    store = JsonStore(tmp_path / "mla")
    session = TuningSession(problem, engine, store, "mla-demo")
    for n in range(12):
        trial = session.ask()
        if n == 4:
            session.tell(trial, failure="segfault")
        else:
            session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
    store.compact("mla-demo")
    return json.loads(store.path("mla-demo").read_text()), session.machine


def test_gptunes_reader_loads_every_successful_record_and_model_of_an_mla_history(tmp_path: Path) -> None:
    history, machine = _mla_history(tmp_path)
    P, O, models = gptune_load(history, DEMO_PROBLEM, [[1.0], [1.5]], _gptune_machine(machine))
    assert sum(len(p) for p in P) == 11, "with the load check on, every successful record is loaded"
    assert all(o[0] is not None for o in O[0] + O[1]), "and the failed one is passed over: GPTune does not exit"
    assert len(models) == len(history["surrogate_model"]) > 0
    for m in models:  # GPTune's Model_LCM layout: theta (Q d), var (Q), kappa (Q m), sigma (m), WS (Q m)
        latent = len(m["raytuner"]["hyperparameters"]["lengthscales"])
        assert len(m["hyperparameters"]) == latent * 1 + latent + latent * 2 + 2 + latent * 2
        assert [e["transformer"] for k in ("input_space", "parameter_space", "output_space") for e in m[k]] == [
            "normalize",
            "normalize",
            "identity",
        ]
    with pytest.raises(SystemExit, match="null"):  # the documented limit: no_load_check loads the failure too
        gptune_load(history, DEMO_PROBLEM, [[1.0], [1.5]], {"machine_name": "elsewhere"}, load_check=False)
    failed = [r for r in history["func_eval"] if r["raytuner"]["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["evaluation_result"] == {"y": None}
    assert failed[0]["raytuner"]["failure_message"] == "segfault"
    assert "machine_configuration" not in failed[0]
    assert failed[0]["raytuner"]["machine_configuration"] == _gptune_machine(machine)
    ok = [r for r in history["func_eval"] if r["raytuner"]["status"] == "ok"]
    assert all(set(r["machine_configuration"]) == set(_gptune_machine(machine)) for r in ok)
    assert all(r["raytuner"]["machine"]["host"] for r in history["func_eval"])
    read = JsonStore(tmp_path / "mla").evaluations("mla-demo")
    again = next(r for r in read if r.status == "failed")
    assert again.machine_configuration == _gptune_machine(machine) and provenance(again).failure_message == "segfault"
    assert "machine_configuration" not in known(provenance(again).model_extra)


def test_a_failed_record_round_trips_and_the_older_layout_still_reads() -> None:
    machine = {"machine_name": "vm", "cpu": {"nodes": 1, "cores": 2}}
    failed = FunctionEvaluation.create(
        {"t": 1.0}, {"x": 0.9}, failure="segfault", outputs=["y"], machine_configuration=machine
    )
    written = failed.to_file()
    assert "machine_configuration" not in written and written["raytuner"]["machine_configuration"] == machine
    assert written["evaluation_result"] == {"y": None} and written["raytuner"]["status"] == "failed"
    assert FunctionEvaluation.model_validate(written) == failed
    assert FunctionEvaluation.model_validate(json.loads(json.dumps(written))).to_dict() == failed.to_dict()
    older = failed.to_dict()  # written before the rule: the machine at the top level
    assert older["machine_configuration"] == machine and FunctionEvaluation.model_validate(older) == failed
    ok = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0}, machine_configuration=machine)
    assert ok.to_file() == ok.to_dict()


def test_export_ok_only_leaves_failures_out_for_a_no_load_check_user(tmp_path: Path) -> None:
    history, machine = _mla_history(tmp_path)
    out = tmp_path / "ok.json"
    result = CliRunner().invoke(
        main,
        ["history", "export", "--from", str(tmp_path / "mla"), "--problem", "mla-demo", "--out", str(out), "--ok-only"],
    )
    assert result.exit_code == 0, result.output
    exported = json.loads(out.read_text())
    assert len(exported["func_eval"]) == 11 and len(exported["surrogate_model"]) == len(history["surrogate_model"])
    P, _, _ = gptune_load(exported, DEMO_PROBLEM, [[1.0], [1.5]], {"machine_name": "elsewhere"}, load_check=False)
    assert sum(len(p) for p in P) == 11
    whole = tmp_path / "all.json"
    CliRunner().invoke(
        main, ["history", "export", "--from", str(tmp_path / "mla"), "--problem", "mla-demo", "--out", str(whole)]
    )
    assert json.loads(whole.read_text())["func_eval"] == history["func_eval"], "an export writes what the store holds"


def test_imported_legacy_models_carry_the_transformers_gptunes_match_reads(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["history", "import", str(DATA / "hypre-2021.json"), "--to", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "hypre.json"
    result = CliRunner().invoke(
        main, ["history", "export", "--from", str(tmp_path), "--problem", "hypre", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    models = json.loads(out.read_text())["surrogate_model"]
    assert len(models) == 5
    for model in models:
        for key in ("input_space", "parameter_space"):
            assert all(
                e["transformer"] == ("onehot" if e["type"] == "categorical" else "normalize") for e in model[key]
            )
        assert [e["transformer"] for e in model["output_space"]] == ["identity"]
    kinds = {e["type"] for e in models[0]["parameter_space"]}
    assert kinds == {"int", "real", "categorical"}


def test_gptunes_reader_loads_a_gptuneband_history(tmp_path: Path) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    band = GPTuneBand(
        problem,
        [{"t": 1.0}],
        seed=0,
        b_min=1,
        b_max=4,
        eta=2,
        executor=InlineExecutor(),
        lcm=LCMOptions(n_starts=1),
    )
    store = JsonStore(tmp_path)
    session = TuningSession(problem, band, store, "band-demo")
    while not band.finished:
        trial = session.ask()
        session.tell(trial, {"y": demo_fidelity(trial.config["x"], 1.0, b=known(trial.provenance.fidelity), b_max=4)})
    store.compact("band-demo")
    history = json.loads(store.path("band-demo").read_text())
    P, O, _ = gptune_load(copy.deepcopy(history), DEMO_PROBLEM, [[1.0]], _gptune_machine(session.machine))
    assert len(P[0]) == len(history["func_eval"]) > 0 and all(o[0] is not None for o in O[0])
    assert all(r.get("raytuner", {}).get("fidelity") for r in history["func_eval"])
    # GPTune's GPTuneBand problem: the fidelity is the first task parameter, "budget" (GPTune_MB.__init__)
    budget = {"name": "budget", "type": "real", "lower_bound": 1 - 1e-12, "upper_bound": 4.0}
    banded = {**DEMO_PROBLEM, "input_space": [budget, *DEMO_PROBLEM["input_space"]]}
    fidelities = [4.0, 2.0, 1.0]
    P, _, _ = gptune_load(history, banded, [[b, 1.0] for b in fidelities], _gptune_machine(session.machine))
    for b, loaded in zip(fidelities, P):
        at = [r["tuning_parameter"]["x"] for r in history["func_eval"] if r["raytuner"]["fidelity"] == b]
        assert [x for [x] in loaded] == at and at, f"every evaluation at fidelity {b} is GPTune's task budget={b}"
    read = JsonStore(tmp_path).evaluations("band-demo")
    assert [r.task_parameter for r in read] == [{"t": 1.0}] * len(read), "raytuner reads its tasks back"


def test_a_fidelity_is_written_as_gptunes_budget_and_read_back_as_raytuners() -> None:
    record = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0}, provenance=Provenance(fidelity=4))
    written = record.to_file()
    assert written["task_parameter"] == {"t": 1.0, "budget": 4.0} and written["raytuner"]["budget_task"] is True
    assert FunctionEvaluation.model_validate(json.loads(json.dumps(written))) == record
    assert FunctionEvaluation.model_validate(record.to_dict()) == record, "a file written before the rule reads"
    # a problem with its own task parameter "budget": its value stays, the fidelity is raytuner's alone
    own = FunctionEvaluation.create({"budget": 2}, {"x": 0.5}, {"y": 1.0}, provenance=Provenance(fidelity=4))
    assert own.to_file() == own.to_dict() and FunctionEvaluation.model_validate(own.to_file()) == own


def test_a_failure_read_from_a_gptune_file_is_a_failed_record() -> None:
    record = FunctionEvaluation.model_validate(
        {"task_parameter": {"t": 1}, "tuning_parameter": {"x": 0.5}, "evaluation_result": {"y": None}}
    )
    assert record.status == "failed" and record.value("y") is None


def _gptune_loads_all(history: dict[str, Any], tasks: list[list[Any]], machine: dict[str, Any]) -> None:
    """GPTune's reader, load check on with the writer's machine, loads every successful record and does not stop."""
    P, _, models = gptune_load(copy.deepcopy(history), DEMO_PROBLEM, tasks, _gptune_machine(machine))
    failed = [r for r in history["func_eval"] if r["raytuner"]["status"] == "failed"]
    assert sum(len(p) for p in P) == len(history["func_eval"]) - len(failed) > 0
    assert len(models) == sum(m["modeler"] == "Model_LCM" for m in history["surrogate_model"])
    assert failed and all(
        r["evaluation_result"] == {"y": None}
        and "machine_configuration" not in r
        and r["raytuner"]["machine_configuration"] == _gptune_machine(machine)
        for r in failed
    )


def test_gptunes_reader_loads_a_tla_searcher_history(tmp_path: Path) -> None:
    from raytuner.searchers import TransferLearningSearcher  # Ray's import only here

    problem = ProblemSpace.parse(DEMO_PROBLEM)
    source = [FunctionEvaluation.create({"t": 0.8}, {"x": x / 20}, {"y": demo(x / 20, 0.8)}) for x in range(20)]
    store = JsonStore(tmp_path)
    searcher = TransferLearningSearcher(
        problem,
        {"t": 1.0},
        source,
        store,
        "tla-demo",
        seed=0,
        executor=InlineExecutor(),
        engine_options={"algorithm": "ensemble", "lcm": LCMOptions(n_starts=1)},
    )
    for n in range(5):  # Ray's calls, in Ray's order, without a cluster
        config = searcher.suggest(f"trial{n}")
        searcher.on_trial_complete(f"trial{n}", None if n == 2 else {"y": demo(config["x"], config["t"])}, error=n == 2)
    store.compact("tla-demo")
    _gptune_loads_all(json.loads(store.path("tla-demo").read_text()), [[1.0]], searcher.session.machine)


def test_gptunes_reader_loads_a_service_history(server: Any) -> None:
    from raytuner.client.remote import RemoteTuner  # gRPC only here

    meta: dict[str, Any] = {
        "tuning_problem_name": "svc-demo",
        "problem_space": DEMO_PROBLEM,
        "machine_configuration": {"machine_name": "cori", "haswell": {"nodes": 2, "cores": 32}},
    }
    with RemoteTuner(server.address, server.keys.create("alice"), timeout=20) as client:
        client.create_session(meta, "mla", tasks=[{"t": 1.0}], options={"n_initial": 2}, seed=4)
        for n in range(4):
            trial = known(client.ask())
            client.tell(
                trial.trial_id,
                None if n == 1 else {"y": demo(trial.config["x"], 1.0)},
                failure="timeout" if n == 1 else None,
            )
    server.store.compact("svc-demo")
    history = json.loads(server.store.path("svc-demo").read_text())
    assert all(
        r["machine_configuration"] == meta["machine_configuration"]
        for r in history["func_eval"]
        if r["raytuner"]["status"] == "ok"
    )
    _gptune_loads_all(history, [[1.0]], meta["machine_configuration"])


def test_history_show_and_import_read_older_strings_by_the_meta_descriptions_types(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from raytuner.cli import main

    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"tuning_problem_name": "hypre", "problem_space": _hypre_problem()}))
    file = str(DATA / "hypre-2021.json")
    inferred = json.loads(CliRunner().invoke(main, ["history", "show", file, "--json"]).stdout)
    typed = json.loads(CliRunner().invoke(main, ["history", "show", file, "--meta", str(meta), "--json"]).stdout)
    assert inferred["schema"]["notes"] and typed["schema"]["notes"] == []
    result = CliRunner().invoke(main, ["history", "import", file, "--to", str(tmp_path / "db"), "--meta", str(meta)])
    assert result.exit_code == 0, result.output
    assert JsonStore(tmp_path / "db").evaluations("hypre")[0].tuning_parameter["coarsen_type"] == "1"
