"""GPTuneBand's options named once (GPTuneBandOptions), and a multi-objective sampler's models without patching."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest

from raytuner.engines import ENGINES, BanditStructure, EngineSpec, GPTuneBand, build_engine
from raytuner.engines.gptuneband.options import GPTuneBandOptions
from raytuner.engines.gptuneband.sampler import MultiObjectiveLevelSampler
from raytuner.engines.mla import MLA
from raytuner.engines.multiobjective import MultiObjectiveMLA, OutputModel
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 1.2}]
#: The options of a GPTuneBand spec as the engine stored them before GPTuneBandOptions (every name, flat).
STORED = {
    "b_min": 1,
    "b_max": 4,
    "eta": 2,
    "fidelities": None,
    "integer_fidelities": None,
    "passes": 2,
    "budget": None,
    "fidelity_mode": "one_shot",
    "n_initial": 2,
    "lcm": {"n_starts": 1, "kernel": "rbf"},
    "acquisition": "ei",
    "acquisition_options": None,
    "objective": "y",
    "search_candidates": 256,
    "model": "levels",
    "source_proposals": "every",
    "later_passes": "all",
    "sharing": "always",
}


def test_a_spec_stored_before_the_options_object_builds_the_same_engine_and_spec() -> None:
    engine = build_engine(EngineSpec("gptuneband", STORED), PROBLEM, TASKS, 0, executor=InlineExecutor())
    assert isinstance(engine, GPTuneBand)
    lcm = STORED["lcm"]
    assert isinstance(lcm, dict)
    stored = {**STORED, "lcm": LCMOptions.from_dict(lcm).to_dict()}
    assert engine.spec.options == stored
    assert engine.options.model == "levels" and engine.structure.fidelities == (4.0, 2.0, 1.0)


def test_the_registry_lists_the_options_fields_and_every_spec_option_is_one() -> None:
    assert ENGINES["gptuneband"].options == tuple(STORED)  # the names and order 0.1's registry listed
    assert set(STORED) == set(GPTuneBandOptions.names())


#: Every option's default in 0.1 (the engine's keywords, and the scheduler's GPTuneBandOptions for the Ray keys).
DEFAULTS_0_1 = {
    "b_min": None,
    "b_max": None,
    "eta": 3,
    "fidelities": None,
    "integer_fidelities": None,
    "passes": None,
    "budget": None,
    "fidelity_mode": "one_shot",
    "n_initial": None,
    "lcm": None,
    "acquisition": "ei",
    "acquisition_options": None,
    "objective": None,
    "search_candidates": 2048,
    "model": "paper",
    "source_proposals": "alternate",
    "later_passes": "agreeing",
    "sharing": "checked",
    "executor": None,
    "source": None,
    "fidelity_key": "fidelity",
    "time_attr": "training_iteration",
}


def test_every_default_is_the_one_0_1_had() -> None:
    defaults = GPTuneBandOptions()
    assert {f.name: getattr(defaults, f.name) for f in fields(GPTuneBandOptions)} == DEFAULTS_0_1


def test_the_options_are_named_never_placed() -> None:
    # 0.1's scheduler options began (passes, budget, ...); these begin (b_min, b_max, ...): a value by
    # place would land silently on another option, so each must be given by name
    with pytest.raises(TypeError):
        GPTuneBandOptions(2)  # type: ignore[call-arg]


def test_the_engine_takes_an_options_object_or_its_fields_by_keyword() -> None:
    options = GPTuneBandOptions(b_min=1, b_max=4, eta=2, passes=1, executor=InlineExecutor())
    by_object = GPTuneBand(PROBLEM, TASKS, 0, options)
    by_keyword = GPTuneBand(PROBLEM, TASKS, 0, b_min=1, b_max=4, eta=2, passes=1, executor=InlineExecutor())
    assert by_object.spec == by_keyword.spec
    over = GPTuneBand(PROBLEM, TASKS, 0, options, passes=3)  # a keyword sets its field over the object's
    assert over.passes == 3 and over.spec.options["passes"] == 3
    assert by_object.ask().config == by_keyword.ask().config


def test_an_unknown_keyword_is_refused_in_one_line_naming_the_options() -> None:
    with pytest.raises(InvalidInputError) as caught:
        GPTuneBand(PROBLEM, TASKS, 0, b_min=1, b_max=4, pases=2)
    assert caught.value.field == "pases" and "passes" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(InvalidInputError, match="options.*pases"):
        build_engine(EngineSpec("gptuneband", {"b_min": 1, "b_max": 4, "pases": 2}), PROBLEM, TASKS)


def test_a_bad_value_is_refused_when_the_options_are_made() -> None:
    with pytest.raises(InvalidInputError, match="^sharing: unknown sharing 'never'"):
        GPTuneBandOptions(sharing="never")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="^later_passes: unknown choice"):
        GPTuneBand(PROBLEM, TASKS, 0, b_min=1, b_max=4, later_passes="some")


def test_the_scheduler_takes_its_brackets_from_structure_and_its_objective_from_metric(tmp_path: Path) -> None:
    from raytuner.schedulers import GPTuneBandOptions as Exported  # here: it imports Ray
    from raytuner.schedulers import GPTuneBandScheduler

    assert Exported is GPTuneBandOptions
    structure = BanditStructure.hyperband(1, 9, 3)
    with pytest.raises(InvalidInputError, match="^structure: give either a structure or b_min"):
        GPTuneBandScheduler(PROBLEM, TASKS, tmp_path, "demo", structure=structure, options=GPTuneBandOptions(b_max=27))
    with pytest.raises(InvalidInputError, match="^options.objective: .*pass metric"):
        GPTuneBandScheduler(
            PROBLEM, TASKS, tmp_path, "demo", structure=structure, options=GPTuneBandOptions(objective="y")
        )
    band = GPTuneBandScheduler(
        PROBLEM, TASKS, tmp_path, "demo", seed=0, structure=structure, options=GPTuneBandOptions(passes=2)
    )
    assert band.engine.spec.options["fidelities"] == [9.0, 3.0, 1.0] and band.engine.spec.options["passes"] == 2


class _Rounds(MLA):
    """A host that fits once, on its first record: its output models must fit there too."""

    def fit_horizon(self) -> int:
        return min(1, len(self.evaluated[0]))


def test_an_output_model_models_its_hosts_evaluations_as_the_host_says() -> None:
    host = _Rounds(PROBLEM, [{"t": 1.0}], seed=0, n_initial=2, executor=InlineExecutor())
    model = OutputModel(host, "y", n_initial=2, executor=InlineExecutor())
    for _ in range(3):
        s = host.ask()
        host.tell(s, {"y": demo_fidelity(s.config["x"], 1.0, b=1, b_max=1)})
    assert model.evaluated is host.evaluated and len(model.evaluated[0]) == 3
    assert model.fit_horizon() == 1 and model.fitted_model() is not None


def test_a_multiobjective_samplers_output_models_are_not_patched() -> None:
    problem = ProblemSpace.parse(
        {
            "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "parameter_space": [{"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "output_space": [{"name": "f1"}, {"name": "f2"}],
        }
    )
    band = GPTuneBand(problem, [{"t": 0.0}], 0, b_min=1, b_max=4, eta=2, executor=InlineExecutor())
    for _ in range(3):
        s = band.ask()
        band.tell(s, {"f1": s.config["a"], "f2": 1 - s.config["a"]})
    sampler = band._level_sampler()
    assert isinstance(sampler, MultiObjectiveLevelSampler) and len(sampler.components) == 2
    for component in sampler.components:
        assert not {"fit_horizon", "sampler", "warm_rows", "scored_task"} & set(vars(component))
        assert component.fit_horizon() == sampler.fit_horizon() and component.sampler() == sampler.sampler()


def test_a_bad_pass_count_or_budget_is_refused_when_the_options_are_made() -> None:
    with pytest.raises(InvalidInputError, match="^passes: must be an integer >= 1"):
        GPTuneBandOptions(passes=0)
    with pytest.raises(InvalidInputError, match="^budget: must be a number > 0"):
        GPTuneBandOptions(budget=-1.0)


def test_a_multiobjective_mla_models_the_logarithm_of_a_skewed_output_alone() -> None:
    problem = ProblemSpace.parse(
        {
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "output_space": [{"name": "linear"}, {"name": "skewed"}],
        }
    )
    engine = MultiObjectiveMLA(problem, [{}], seed=0, n_initial=6, executor=InlineExecutor())
    for _ in range(6):
        s = engine.ask()
        engine.tell(s, {"linear": s.config["x"], "skewed": math.exp(12 * s.config["x"])})
    engine.ask()  # the first model-guided suggestion chooses each output's transform
    assert [c.model.options.log_transform for c in engine.components] == [False, True]
