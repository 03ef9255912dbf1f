"""The session layer: one engine wired to one history store, and the trial lifecycle.

- :mod:`~raytuner.session.tuning_session`: :class:`~raytuner.session.tuning_session.TuningSession`,
  the ask/tell loop every face drives;
- :mod:`~raytuner.session.trial`: a suggestion handed out, as the trial ledger keeps it;
- :mod:`~raytuner.session.progress`: where a run stands, per task.

Example:
    >>> import tempfile
    >>> from raytuner.engines import RandomSearch
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.session.tuning_session import TuningSession
    >>> from raytuner.store import JsonStore
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> with JsonStore(tempfile.mkdtemp()) as store:
    ...     session = TuningSession(problem, RandomSearch(problem, [{"t": 1.0}], seed=0), store, "demo")
    ...     trial = session.ask()
    ...     session.tell(trial.trial_id, {"y": 0.5}).status
    'ok'
"""
