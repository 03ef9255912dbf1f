"""The remote-jobs example under a real one-node Slurm, against a real ``raytuner serve`` on loopback.

``sbatch --array=0-7 examples/remote_hpc_job/job.sh`` works for one session
created with the CLI; every array task asks and tells (its program through
``srun``) until the session has its evaluations. The history must then hold
exactly what the jobs' outputs show as acknowledged: no record lost, none
duplicated, none that no job told. With two array tasks killed mid-trial
(``scancel --batch --signal=KILL``: the job script dies at once, as on a node failure),
trial leases hand their trials out again and the session still finishes
(skipped until ``raytuner session create`` has ``--lease``).

The cluster (``slurm`` fixture) needs root and Debian's ``slurm-wlm`` and
``munge``; without them these tests are skipped with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.slurm import NO_LEASES, ArrayRun, leases_supported, run_array, wait_for
from raytuner.testing.slurm import LocalSlurm, SlurmUnavailable, processes_of

TASKS = 8
EVALUATIONS = 8


def _check_history(run: ArrayRun) -> None:
    """The history equals what the jobs told: every acknowledged tell stored, nothing twice, nothing else."""
    assert len(run.told) == EVALUATIONS, run.told
    assert run.lost == []
    assert run.duplicates == 0
    assert run.unexplained == []
    assert len(run.records) == EVALUATIONS
    assert {t.uid for t in run.told} == run.uids
    job_of_task = {int(job["ArrayTaskId"]): job["JobId"] for job in run.jobs}
    by_uid = {r.uid: r for r in run.records}
    told_by = {t.uid: job_of_task[t.task] for t in run.told}
    assert {uid: str(r.additional_output["job"]) for uid, r in by_uid.items()} == told_by  # the job that told it


def test_an_array_of_jobs_fills_the_session_and_the_history_holds_what_they_told(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    run = run_array(slurm, tmp_path, tasks=TASKS, max_evaluations=EVALUATIONS)
    _check_history(run)
    assert [job["JobState"] for job in run.jobs] == ["COMPLETED"] * TASKS, run.jobs
    assert all(job["ExitCode"] == "0:0" for job in run.jobs)
    assert len({h.trial_id for h in run.handed_out}) == len(run.handed_out) == EVALUATIONS  # none handed twice
    assert all(t.runtime is not None for t in run.told)  # no program failed
    assert all(r.raytuner and r.raytuner.machine and r.raytuner.machine["slurm_environment"] for r in run.records)


def test_two_jobs_cancelled_mid_trial_lose_nothing_and_their_trials_are_handed_out_again(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    if not leases_supported():  # checked at run time: the test runs once trial leases are merged
        pytest.skip(NO_LEASES)
    # a lease a live job keeps on a busy node: its heartbeat's first renewal comes after a Python start-up, eight
    # of them at once on two cores (a 5 s lease ran out there: the trial was handed out again and run twice)
    run = run_array(slurm, tmp_path, tasks=TASKS, max_evaluations=EVALUATIONS, cancel=[1, 2], lease=15)
    _check_history(run)
    completed = {int(job["ArrayTaskId"]) for job in run.jobs if job["JobState"] == "COMPLETED"}
    assert completed == set(range(TASKS)) - {1, 2}, run.jobs
    assert [held.task for held in run.cancelled] == [1, 2]
    assert not {held.trial_id for held in run.cancelled} & {t.trial_id for t in run.told}  # never told
    assert run.handed_out_again == run.cancelled  # each killed trial's configuration told by another job


def test_a_second_cluster_runs_beside_the_first_and_stop_ends_its_jobs_and_daemons(slurm: LocalSlurm) -> None:
    other = LocalSlurm(cpus=1).start()
    directory, conf, daemons = other.directory, other.conf, other.pids
    assert directory is not None and sorted(daemons) == ["munged", "slurmctld", "slurmd"]
    job = other.sbatch(["--wrap", "sleep 300"], cwd=directory)
    wait_for("the job to run", lambda: other.jobs(job)[0]["JobState"] == "RUNNING", 120)
    assert processes_of(conf)  # the job's shell and sleep, its slurmstepd
    other.stop()
    assert not directory.exists() and processes_of(conf) == []
    assert not any(Path(f"/proc/{pid}").exists() for pid in daemons.values())
    assert not other.running and slurm.running  # the fixture's cluster is untouched
    assert slurm.command(["sinfo", "--noheader", "--Node", "--format=%T"]).stdout.strip() == "idle"


def test_a_machine_without_slurm_gives_the_reason_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm or munge command on it
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    cluster = LocalSlurm()
    with pytest.raises(SlurmUnavailable, match=r"Slurm commands not found: munged, slurmctld, .*apt-get install"):
        cluster.start()
    assert cluster.directory is None and not cluster.running
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SlurmUnavailable, match="needs root"):
        cluster.start()
