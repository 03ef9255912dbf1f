"""Harnesses for your own tests and for the examples (not used by the library itself).

- :mod:`raytuner.testing.cluster`: a local multi-node Ray cluster;
- :mod:`raytuner.testing.mongod`: a local ``mongod`` on a free loopback port;
- :mod:`raytuner.testing.slurm`: a local one-node Slurm (munged, slurmctld, slurmd) on free ports.

The papers' test problems are in :mod:`raytuner.test_problems`.
"""
