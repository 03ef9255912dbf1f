"""The LCM at scale: balanced subsets, the FITC posterior, subset fits with held-out accuracy, and refits on growth."""

from __future__ import annotations

import numpy as np
import pytest
from record_helpers import description, known

from raytuner.engines import MLA
from raytuner.engines.base import Suggestion
from raytuner.errors import InvalidInputError
from raytuner.models import LCM, LCMOptions, TrainingData
from raytuner.models.executors import InlineExecutor
from raytuner.models.lcm import approximation
from raytuner.models.persistence import load_surrogate, surrogate_record
from raytuner.models.posterior import balanced_subset
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo

INLINE = InlineExecutor()


def _smooth(counts: tuple[int, ...], seed: int = 0) -> TrainingData:
    """Related smooth functions of two inputs (no noise), ``counts[i]`` samples of task i."""
    rng = np.random.default_rng(seed)
    X = [rng.random((n, 2)) for n in counts]
    return TrainingData(X, [np.sin(3 * x[:, 0]) + (1 + i) * x[:, 1] ** 2 for i, x in enumerate(X)])


def test_a_balanced_subset_spreads_over_tasks_and_repeats() -> None:
    task = np.repeat([0, 1, 2], [50, 3, 20])
    chosen = balanced_subset(task, 3, 30)
    assert len(chosen) == 30 and len(set(chosen.tolist())) == 30
    assert np.bincount(task[chosen], minlength=3).tolist() == [14, 3, 13]  # the small task keeps all it has
    assert np.array_equal(chosen, balanced_subset(task, 3, 30))  # the same data, the same subset
    assert np.array_equal(balanced_subset(task, 3, 500), np.arange(len(task)))


def test_fitc_predicts_as_the_exact_posterior_does_on_smooth_data() -> None:
    data = _smooth((120, 120))
    exact = LCM(LCMOptions(n_starts=1, fit_limit=None, exact_limit=None)).fit(data, seed=0, executor=INLINE)
    hp = exact.hyperparameters
    sparse = LCM(LCMOptions(fit_limit=100, exact_limit=150)).condition(data, hp)
    assert exact.exact and not sparse.exact
    assert sparse.report.approximation == {"method": "fitc", "samples": 240, "fit_samples": 100, "inducing": 100}
    grid = np.random.default_rng(1).random((200, 2))
    for task in (0, 1):
        m_exact, v_exact = exact.predict(task, grid)
        m_sparse, v_sparse = sparse.predict(task, grid)
        spread = float(np.std(m_exact))
        assert np.sqrt(np.mean((m_sparse - m_exact) ** 2)) < 0.02 * spread
        assert np.all(v_sparse >= 0)
    # FITC's likelihood approximates the exact one at the same hyperparameters, per sample
    assert abs(sparse.log_likelihood - exact.log_likelihood) / 240 < 0.5


def test_a_fit_past_its_limit_says_so_and_measures_itself_on_the_samples_it_left_out() -> None:
    data = _smooth((90, 60))
    fitted = LCM(LCMOptions(n_starts=2, fit_limit=60)).fit(data, seed=0, executor=INLINE)
    report = fitted.report.approximation
    assert report is not None and report["method"] == "subset"
    assert (report["samples"], report["fit_samples"], report["held_out"]) == (150, 60, 90)
    assert all(s["samples"] == 60 for s in fitted.report.starts)
    assert 0 <= report["held_out_rmse"] < 0.1  # standardised units: a smooth function is learned
    assert report["held_out_log_density"] > 0
    assert fitted.exact  # 150 samples: the posterior is still exact
    assert approximation(LCMOptions(), 100) is None


def test_a_sparse_model_refuses_leave_one_out_and_round_trips_through_a_record() -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    rng = np.random.default_rng(0)
    tasks = [{"t": 1.0}, {"t": 1.5}]
    records = [
        FunctionEvaluation.create(t, {"x": float(x)}, {"y": float(np.sin(4 * x) * t["t"])})
        for t in tasks
        for x in rng.random(40)
    ]
    data, uids = TrainingData.from_records(problem, tasks, records)
    options = LCMOptions(n_starts=1, fit_limit=30, exact_limit=50)
    fitted = LCM(options).fit(data, seed=0, executor=INLINE)
    assert not fitted.exact
    with pytest.raises(InvalidInputError, match="exact_limit"):
        fitted.leave_one_out()
    record = surrogate_record(fitted, problem, tasks, uids, "test")
    assert description(record)["fit"]["approximation"]["method"] == "fitc"
    assert record.model_stats["gradients"] is None
    again = load_surrogate(record, records)
    X = np.linspace(0, 1, 7)[:, None]
    np.testing.assert_allclose(again.predict(1, X)[0], fitted.predict(1, X)[0], rtol=1e-9, atol=1e-12)
    assert again.options == fitted.options  # the priors and the kernel included
    # a model stored before its record named the priors was fitted without them
    old = record.model_copy(
        update={
            "modeling_options": {
                k: v for k, v in record.modeling_options.items() if k not in ("lengthscale_prior", "noise_prior")
            }
        }
    )
    loaded = load_surrogate(old, records).options
    assert loaded.lengthscale_prior is None and loaded.noise_prior is None and loaded.kernel == "matern52"


def test_limits_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="fit_limit"):
        LCMOptions(fit_limit=3)
    with pytest.raises(InvalidInputError, match="refit_growth"):
        LCMOptions(refit_growth=-1)
    with pytest.raises(InvalidInputError, match="lengthscale_prior"):
        LCMOptions(lengthscale_prior=(0.0, 0.0))
    assert LCMOptions(lengthscale_prior=(-1, 2)).lengthscale_prior == (-1.0, 2.0)
    for bad in ("wide", (0.0, float("nan")), (True, 1.0)):
        with pytest.raises(InvalidInputError, match="lengthscale_prior.*'spacing'"):
            LCMOptions(lengthscale_prior=bad)  # type: ignore[arg-type]  # the wrong type is what the test gives
    for wrong in ((0.0, 30.0), (1.1, -1.0), (1.1,), "gamma"):
        with pytest.raises(InvalidInputError, match=r"noise_prior: must be \(shape, rate\)"):
            LCMOptions(noise_prior=wrong)  # type: ignore[arg-type]  # the wrong type is what the test gives
    assert LCMOptions(noise_prior=(2, 10)).noise_prior == (2.0, 10.0)


def test_the_spacing_prior_follows_the_samples_per_task_and_is_stored_by_name() -> None:
    options = LCMOptions()
    assert options.lengthscale_prior == "spacing" and options.noise_prior == (1.1, 30.0)
    assert options.lengthscale_prior_for(10, 1) == pytest.approx((np.log(0.1), 1.0))
    assert options.lengthscale_prior_for(16, 4) == pytest.approx((np.log(0.5), 1.0))  # 16 ** (-1/4)
    assert LCMOptions(lengthscale_prior=None).lengthscale_prior_for(10, 1) is None
    stored = options.to_dict()
    assert stored["lengthscale_prior"] == "spacing" and stored["noise_prior"] == [1.1, 30.0]
    assert LCMOptions(**stored) == options


@pytest.mark.parametrize(
    "priors", [{"noise_prior": (1.1, 30.0)}, {"lengthscale_prior": (-1.0, 0.5), "noise_prior": (2.0, 5.0)}]
)
def test_the_priors_add_their_gradients(priors: dict) -> None:
    from scipy.optimize import approx_fprime

    from raytuner.models.hyperparameters import Hyperparameters
    from raytuner.models.likelihood import NegativeLogLikelihood

    data = _smooth((8, 6))
    X, task, y = data.stacked()
    plain = NegativeLogLikelihood(X, task, y, tasks=2, latent=2, rank=1, kernel="matern52")
    objective = NegativeLogLikelihood(X, task, y, tasks=2, latent=2, rank=1, kernel="matern52", **priors)
    theta = Hyperparameters.initial(2, 2, 2, 1, rng=np.random.default_rng(3)).to_vector()
    numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-6)
    np.testing.assert_allclose(objective(theta)[1], numeric, rtol=1e-4, atol=1e-4)
    shape, rate = priors["noise_prior"]
    noise = np.exp(theta[-2:])  # the last entries are the tasks' log noise variances
    added = float(np.sum(rate * noise - (shape - 1) * theta[-2:]))
    if "lengthscale_prior" in priors:
        mean, sd = priors["lengthscale_prior"]
        added += 0.5 * float(np.sum(((theta[:4] - mean) / sd) ** 2))
    assert objective(theta)[0] == pytest.approx(plain(theta)[0] + added, rel=1e-12)


@pytest.mark.parametrize("seed", [4, 6, 9, 10])
def test_the_noise_prior_keeps_a_needle_from_being_called_noise(seed: int) -> None:
    """The demo at t = 2 is a narrow needle: without the noise prior, fits of these 10-sample designs (4 of
    the first 12 seeds) under the spacing prior called the whole signal noise (variance 1.0, the variance of
    the standardised data), and the acquisition had nothing to go on."""
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    configs = sample_configurations(problem, {"t": 2.0}, 10, seed=seed)
    data = TrainingData([problem.parameter_space.encode(configs)], [np.array([demo(c["x"], 2.0) for c in configs])])
    noise = {
        name: float(LCM(LCMOptions(noise_prior=prior)).fit(data, seed=0, executor=INLINE).hyperparameters.noise[0])
        for name, prior in (("without", None), ("with", LCMOptions().noise_prior))
    }
    assert noise["with"] < 0.05 and noise["without"] > 0.5, noise


def test_the_lengthscale_prior_adds_its_gradient() -> None:
    from scipy.optimize import approx_fprime

    from raytuner.models.hyperparameters import Hyperparameters
    from raytuner.models.likelihood import NegativeLogLikelihood

    data = _smooth((8, 6))
    X, task, y = data.stacked()
    objective = NegativeLogLikelihood(
        X, task, y, tasks=2, latent=2, rank=1, kernel="rbf", lengthscale_prior=(-1.0, 0.5)
    )
    theta = Hyperparameters.initial(2, 2, 2, 1, rng=np.random.default_rng(3)).to_vector()
    numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-6)
    np.testing.assert_allclose(objective(theta)[1], numeric, rtol=1e-4, atol=1e-4)


def _tell(engine: MLA, suggestion: Suggestion) -> None:
    x, t = suggestion.config["x"], suggestion.task["t"]
    engine.tell(
        FunctionEvaluation.create(
            suggestion.task,
            suggestion.config,
            {"y": float(np.sin(5 * x) * t)},
            provenance=suggestion.provenance or Provenance(),
        )
    )


def test_mla_reoptimises_only_when_its_data_grew_by_refit_growth() -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    engine = MLA(
        problem,
        [{"t": 1.0}, {"t": 2.0}],
        seed=0,
        n_initial=5,
        executor=INLINE,
        lcm=LCMOptions(n_starts=1, refit_growth=0.25),
    )
    optimised: list[tuple[int, bool, int | None]] = []
    for _ in range(14):
        s = engine.ask()
        if s.provenance.proposer == "model":
            fitted = known(engine.fitted_model())
            optimised.append((len(fitted.z), fitted.report.optimised, fitted.report.optimised_samples))
        _tell(engine, s)
    assert optimised[0] == (10, True, 10)
    last = 10
    for samples, was_optimised, said in optimised[1:]:
        assert was_optimised == (samples >= 1.25 * last), (samples, last)
        last = samples if was_optimised else last
        assert said == last
    assert [o for _, o, _ in optimised].count(False) >= 1 and [o for _, o, _ in optimised].count(True) >= 2
