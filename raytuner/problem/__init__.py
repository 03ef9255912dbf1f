"""The problem layer: what is tuned and what an evaluation of it is.

Every other layer builds on these modules; they import nothing above them:

- :mod:`~raytuner.problem.space`, :mod:`~raytuner.problem.parameters`,
  :mod:`~raytuner.problem.constraints`: the task (input), parameter and output
  spaces, and constraints over them;
- :mod:`~raytuner.problem.records`: records in GPTune's history-database format,
  with what :mod:`~raytuner.problem.values`, :mod:`~raytuner.problem.outcome`,
  :mod:`~raytuner.problem.environment` and :mod:`~raytuner.problem.gptune_fields`
  put into them;
- :mod:`~raytuner.problem.pareto`: Pareto fronts and the best record;
- :mod:`~raytuner.problem.sampling`: Latin hypercube samples;
- :mod:`~raytuner.problem.meta` and :mod:`~raytuner.problem.history_options`:
  GPTuneCrowd's meta description of a problem.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> ProblemSpace.parse(DEMO_PROBLEM).parameter_space.names
    ['x']
"""
