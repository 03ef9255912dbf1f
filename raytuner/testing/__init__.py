"""Harnesses for tests, examples and benchmarks (not used by the library itself).

- :mod:`raytuner.testing.functions`: the synthetic objectives of the papers
  (the demo problem every example uses, Branin, Ishigami, ...);
- :mod:`raytuner.testing.cluster`: a local multi-node Ray cluster;
- :mod:`raytuner.testing.mongod`: a local ``mongod`` on a free loopback port;
- :mod:`raytuner.testing.service`: a tuning server (or Optuna's) in a process of its own, and
  client threads that start together.
"""
