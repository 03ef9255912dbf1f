"""One way to build an engine (issue 18, item 2): the registry, EngineSpec, Engine.spec, fresh_engine.

Every registered engine builds from a ``(name, options)`` spec plus what the face has (an executor,
source data); every engine reports the spec it was built from, as JSON-able data, and an engine built
again from it makes the same suggestions with the same seed. Bad specs are refused with one line
that names the field and the allowed values.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from record_helpers import known

from raytuner.engines import (
    ENGINES,
    MLA,
    Engine,
    EngineSpec,
    GPTuneBand,
    MultiFidelityEngine,
    Suggestion,
    build_engine,
    fresh_engine,
)
from raytuner.engines.gptuneband.options import GPTuneBandOptions
from raytuner.engines.transfer import SourceData, TransferLearning
from raytuner.errors import InvalidInputError, TuningFinished
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_fidelity

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
DISCRETE = ProblemSpace.parse(
    {
        "parameter_space": [
            {"name": "bx", "type": "categorical", "categories": [16, 32, 64, 128]},
            {"name": "tile", "type": "categorical", "categories": [1, 2, 4]},
        ],
        "output_space": [{"name": "time"}],
    }
)
FAST = LCMOptions(n_starts=1, warm_starts=1, max_iterations=40, warm_iterations=10, screen=2).to_dict()
TASK = {"t": 1.0}
INLINE = InlineExecutor()

#: name -> (problem, tasks, options); every registered engine is here (checked below).
SPECS: dict[str, tuple[ProblemSpace, list[dict[str, Any]], dict[str, Any]]] = {
    "random": (PROBLEM, [TASK, {"t": 2.0}], {}),
    "mla": (
        PROBLEM,
        [TASK, {"t": 2.0}],
        {"n_initial": 2, "design": "shared", "lcm": FAST, "search_candidates": 128},
    ),
    "gptuneband": (
        PROBLEM,
        [TASK],
        {"b_min": 1, "b_max": 4, "eta": 2, "n_initial": 1, "lcm": FAST, "search_candidates": 128},
    ),
    "discrete": (DISCRETE, [{}], {"n_initial": 2, "method": "pi"}),
    "transfer": (PROBLEM, [TASK], {"algorithm": "weighted_sum_dynamic", "lcm": FAST, "search_candidates": 128}),
    "tla1": (PROBLEM, [TASK], {"lcm": FAST}),
    "tla2": (PROBLEM, [TASK], {"n_initial": 2, "lcm": FAST, "search_candidates": 128}),
}


def source_records() -> list[FunctionEvaluation]:
    """Evaluations of two other tasks (the transfer engines' source), deterministic."""
    xs = np.linspace(0.05, 0.95, 8)
    return [
        FunctionEvaluation.create({"t": t}, {"x": float(x)}, {"y": demo(float(x), t)}) for t in (0.5, 2.0) for x in xs
    ]


SOURCE = source_records()


def outcome(s: Suggestion) -> FunctionEvaluation:
    """The evaluation of a suggestion on the demo function (or a made-up kernel time)."""
    if "x" in s.config:
        y = (
            demo_fidelity(s.config["x"], s.task["t"], b=s.fidelity, b_max=4)
            if s.fidelity
            else demo(s.config["x"], s.task["t"])
        )
        return FunctionEvaluation.create(s.task, s.config, {"y": y}, provenance=s.provenance)
    time = abs(s.config["bx"] - 64) / 16 + abs(s.config["tile"] - 2)
    return FunctionEvaluation.create(s.task, s.config, {"time": time}, provenance=s.provenance)


def build(name: str, seed: int = 3) -> Engine:
    problem, tasks, options = SPECS[name]
    return build_engine(EngineSpec(name, options), problem, tasks, seed, executor=INLINE, source=_source(name))


def _source(name: str) -> Any:
    """The source of an engine that transfers; none for those that merely may (their plain path is tested)."""
    return SOURCE if "source" in ENGINES[name].needs else None


def test_every_registered_engine_is_tested_and_declares_its_constructor_options() -> None:
    assert sorted(SPECS) == sorted(ENGINES)
    for name, entry in ENGINES.items():
        parameters: Mapping[str, object] = inspect.signature(entry.engine.__init__).parameters
        keywords = {
            p for p, v in parameters.items() if isinstance(v, inspect.Parameter) and v.kind == v.KEYWORD_ONLY
        } - {"executor", "source"}
        if name == "gptuneband":  # its keywords are GPTuneBandOptions' fields; a structure's eta and fidelities are
            fields = {f.name: f for f in dataclasses.fields(GPTuneBandOptions)}
            parameters = {**parameters, **fields}
            keywords = set(fields) - {"executor", "source", "fidelity_key", "time_attr"}
        if name == "tla2":  # TLA2 passes MLA's options on
            keywords |= set(ENGINES["mla"].options)
        if name == "transfer":  # the target task, the source and the seed are given beside the spec
            keywords |= {"algorithm"}
        assert set(entry.options) == keywords, name
        assert ("executor" in entry.needs) == ("executor" in parameters or name == "tla2"), name
        assert ("sources" in entry.needs) == ("source" in parameters and "source" not in entry.needs), name
        assert entry.engine.name == name


@pytest.mark.parametrize("name", sorted(SPECS))
def test_an_engine_rebuilt_from_its_spec_suggests_the_same(name: str) -> None:
    engine = build(name)
    spec = engine.spec
    assert spec.name == name and spec.options.items() >= SPECS[name][2].items()
    again = EngineSpec.from_dict(json.loads(json.dumps(spec.to_dict())))  # JSON-able, round trip
    assert again == spec
    problem, tasks, _ = SPECS[name]
    rebuilt = build_engine(again, problem, tasks, 3, executor=INLINE, source=_source(name))
    fresh = fresh_engine(engine)
    assert rebuilt.spec == fresh.spec == spec
    first = engine.ask()
    assert rebuilt.ask() == first and fresh.ask() == first
    if name == "tla1":  # one prediction, then nothing more to suggest
        with pytest.raises(TuningFinished):
            engine.ask()
        return
    # after a few evaluations (the model-based engines fit a model), a rebuilt engine replaying
    # the log, and warm-started from the stored models, makes the same next suggestion
    records = [outcome(first)]
    engine.tell(records[0])
    for _ in range(3):
        records.append(outcome(engine.ask()))
        engine.tell(records[-1])
    models = engine.take_models()
    replayed = fresh_engine(engine)
    replayed.replay(records)
    replayed.restore_models(models)
    assert replayed.ask() == engine.ask()


def test_another_seed_changes_the_first_suggestion() -> None:
    assert build("random", seed=1).ask().config != build("random", seed=2).ask().config


def test_the_executor_goes_only_to_engines_that_fit_models() -> None:
    for name, entry in ENGINES.items():
        engine = build(name)
        assert (engine.executor is INLINE) == ("executor" in entry.needs), name
        assert "executor" not in engine.spec.options
    assert "source" not in build("transfer").spec.options


def test_a_transfer_engine_rebuilt_shares_its_fitted_source() -> None:
    engine = build("transfer")
    assert isinstance(engine, TransferLearning) and isinstance(engine.source, SourceData)
    assert fresh_engine(engine).source is engine.source


@pytest.mark.parametrize(
    ("name", "options", "tasks", "source", "message"),
    [
        (
            "annealing",
            {},
            [TASK],
            None,
            "engine: unknown engine 'annealing' (allowed: discrete, gptuneband, mla, random, tla1, tla2, transfer)",
        ),
        ("random", {"bogus_option": 1}, [TASK], None, "options: random takes no option 'bogus_option'"),
        (
            "mla",
            {"candidates": 256},
            [TASK],
            None,
            "options: mla takes no option 'candidates' (allowed: acquisition, acquisition_options, batch, design, lcm, "
            "n_initial, objective, search_candidates, sharing)",
        ),
        ("mla", {"sharing": "never"}, [TASK], None, "sharing: unknown sharing 'never' (allowed: checked, always)"),
        ("transfer", {}, [TASK], None, "source: the transfer engine transfers from source data"),
        ("tla2", {}, [TASK], None, "source: the tla2 engine transfers from source data"),
        ("transfer", {}, [TASK, {"t": 3.0}], SOURCE, "tasks: the transfer engine tunes one target task, not 2"),
        ("mla", {"lcm": {"n_start": 2}}, [TASK], None, "options.lcm: mla: "),
        ("mla", {"lcm": {"kernel": "cubic"}}, [TASK], None, "kernel: unknown kernel 'cubic'"),
        ("mla", {"acquisition_options": [1]}, [TASK], None, "options: mla: "),
        ("mla", {"lcm": "fast"}, [TASK], None, "options.lcm: mla: expected an object of fields, got 'fast'"),
        ("tla2", {"source_model": 3}, [TASK], SOURCE, "options.source_model: tla2: expected an object of fields"),
        ("mla", {"n_initial": 0}, [TASK], None, "n_initial: must be an integer >= 1, got 0"),
        ("gptuneband", {"eta": 2}, [TASK], None, "b_min: required unless fidelities are given"),
        ("transfer", {"algorithm": "best"}, [TASK], SOURCE, "algorithm: unknown TLA algorithm 'best' (allowed: "),
    ],
)
def test_bad_specs_are_refused_in_one_line_that_names_the_field(
    name: str, options: dict[str, Any], tasks: list[dict[str, Any]], source: Any, message: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        build_engine(EngineSpec(name, options), PROBLEM, tasks, 0, source=source)
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text, text


def test_options_must_be_plain_data() -> None:
    with pytest.raises(InvalidInputError, match=r"^options\.executor: InlineExecutor is not plain data"):
        EngineSpec("mla", {"executor": INLINE})
    with pytest.raises(InvalidInputError, match=r"^options: must be an object of option names"):
        EngineSpec("mla", [1, 2])  # type: ignore[arg-type]  # the wrong type is what the test gives
    assert EngineSpec("mla", {"lcm": LCMOptions(n_starts=2)}).options["lcm"]["n_starts"] == 2


def test_options_stored_before_the_priors_rebuild_the_model_they_fitted() -> None:
    """A spec stored before ``to_dict`` named a prior had none; a user's few fields take today's defaults."""
    stored = {k: v for k, v in LCMOptions(kernel="rbf").to_dict().items() if not k.endswith("_prior")}
    engine = build_engine(EngineSpec("mla", {"lcm": stored}), PROBLEM, [TASK], 0, executor=INLINE)
    options = engine.spec.options["lcm"]
    assert options["kernel"] == "rbf" and options["lengthscale_prior"] is None and options["noise_prior"] is None
    partial = build_engine(EngineSpec("mla", {"lcm": {"n_starts": 2}}), PROBLEM, [TASK], 0, executor=INLINE)
    assert partial.spec.options["lcm"]["noise_prior"] == list(known(LCMOptions().noise_prior))
    assert partial.spec.options["lcm"]["lengthscale_prior"] == "spacing"


def test_band_offers_the_scheduler_promotions_in_one_ask() -> None:
    """Iterative fidelity: the ask after a complete rung is the promotion, naming its parent."""
    band = build_engine(
        EngineSpec("gptuneband", {**SPECS["gptuneband"][2], "fidelity_mode": "iterative"}),
        PROBLEM,
        [TASK],
        0,
        executor=INLINE,
    )
    assert isinstance(band, GPTuneBand) and isinstance(band, MultiFidelityEngine)
    assert not isinstance(build("mla"), MultiFidelityEngine)
    promotions = 0
    while not band.finished:
        ready = band.ready_promotions()
        suggestion = band.ask()
        if ready:
            assert suggestion.provenance.proposer == "promotion" and suggestion.provenance.parent is not None
            parent = suggestion.provenance.parent
            assert not band.retired(parent)
            promotions += 1
        else:
            assert suggestion.provenance.parent is None
        band.tell(outcome(suggestion))
    expected = sum(n for s in range(band.structure.s_max + 1) for n, _ in band.structure.rungs(s)[1:])
    assert promotions == expected > 0
    assert band.progress()["finished"] and band.best_per_task()[0] is not None


@pytest.mark.parametrize("seed", [-5, 1.5, True, "7"])
def test_a_bad_seed_is_refused_when_the_engine_is_built(seed: Any) -> None:
    problem, tasks, options = SPECS["random"]
    with pytest.raises(InvalidInputError, match=r"^seed: .* is not a seed"):
        build_engine(EngineSpec("random", options), problem, tasks, seed)


def test_fresh_engine_refuses_an_engine_the_registry_does_not_build() -> None:
    from raytuner.engines import RandomSearch

    class Mine(RandomSearch):
        pass

    problem, tasks, _ = SPECS["random"]
    with pytest.raises(InvalidInputError, match=r"^engine: Mine is not a registered engine"):
        fresh_engine(Mine(problem, tasks, seed=0))


@pytest.mark.parametrize(("former", "name"), [("band", "gptuneband"), ("tla", "transfer")])
def test_a_spec_stored_under_an_engine_s_former_name_builds_that_engine(former: str, name: str) -> None:
    stored = json.loads(json.dumps({"name": former, "options": SPECS[name][2]}))  # as an earlier version stored it
    spec = EngineSpec.from_dict(stored)
    assert spec.name == name and spec.to_dict()["name"] == name
    problem, tasks, _ = SPECS[name]
    engine = build_engine(spec, problem, tasks, 3, executor=INLINE, source=_source(name))
    assert type(engine) is ENGINES[name].engine and engine.spec.name == name


def test_the_command_line_offers_every_registered_engine_by_its_name() -> None:
    from raytuner.cli.rci import rci as rci_group
    from raytuner.cli.service import session_group

    helps = [
        next(p.help for p in command.params if p.name == "engine")
        for group in (rci_group, session_group)
        for command in group.commands.values()
        if any(p.name == "engine" for p in command.params)
    ]
    assert len(helps) == 2 and all(set(known(h).rstrip(".").split(": ")[1].split(" | ")) == set(ENGINES) for h in helps)


def test_a_spec_that_names_the_lcm_s_options_options_as_stored_before_still_builds() -> None:
    stored = {"name": "mla", "options": {"n_initial": 2, "options": {"n_starts": 2}}}  # as an earlier version stored it
    engine = build_engine(EngineSpec.from_dict(stored), PROBLEM, [TASK], 0, executor=INLINE)
    assert isinstance(engine, MLA) and engine.model.options.n_starts == 2 and "options" not in engine.spec.options
    assert engine.spec.options["lcm"]["n_starts"] == 2
