"""Start and stop a throw-away one-node Slurm cluster (for tests and benchmarks of batch jobs).

A :class:`LocalSlurm` runs ``munged``, ``slurmctld`` and ``slurmd`` (Debian's
``munge`` and ``slurm-wlm`` packages: ``apt-get install slurm-wlm munge``)
with everything they write in a temporary directory: the munge key and
socket, ``slurm.conf``, the controller's state, the node's spool and the
logs. The daemons listen on free loopback ports, never Slurm's defaults, so
two clusters (two test workers) do not collide, and none of them touches
``/etc/slurm`` or a munge daemon the machine already runs: Slurm's commands
find this cluster through ``SLURM_CONF`` (:attr:`LocalSlurm.env`).

The node has ``cpus`` slots (default: the machine's CPUs; more than the
machine has are allowed, ``SlurmdParameters=config_overrides``, so that
several small jobs of a test run at once on a small machine). Processes are
tracked by ``proctrack/linuxproc`` and ``task/none`` (no cgroups needed),
and the scheduler runs at once on every submission and job end.

:meth:`LocalSlurm.stop` cancels the cluster's jobs, stops the daemons and
removes the directory; it runs at interpreter exit at the latest, and on Linux
the kernel stops the daemons should the Python process die without running
``atexit``. The daemons run as root, so the cluster needs root: where it
cannot start (not root, a package missing, a daemon that fails) :meth:`start`
raises :class:`SlurmUnavailable`, whose message says why (a test skips with it).

Example:
    >>> with LocalSlurm(cpus=4) as slurm:                           # doctest: +SKIP
    ...     job = slurm.sbatch(["--wrap", "hostname"])
    ...     slurm.wait_for_jobs(job)[0]["JobState"]
    'COMPLETED'
"""

from __future__ import annotations

import atexit
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from raytuner.errors import RaytunerError
from raytuner.testing.harness import Harness
from raytuner.testing.mongod import death_signal_prefix, free_port

__all__ = ["LocalSlurm", "SlurmUnavailable", "REQUIRED_COMMANDS", "processes_of"]

log = logging.getLogger(__name__)

#: The commands a :class:`LocalSlurm` runs, all from Debian's ``slurm-wlm`` and ``munge`` packages.
REQUIRED_COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "scontrol", "srun")
_INSTALL_HINT = "install them with `apt-get install slurm-wlm munge` (README's test command does)"
_DAEMONS = ("munged", "slurmctld", "slurmd")  # started in this order, stopped in the reverse one


class SlurmUnavailable(RaytunerError):
    """A :class:`LocalSlurm` cannot start on this machine; the message says why (tests skip with it)."""


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _check_machine() -> None:
    """Raise :class:`SlurmUnavailable` unless this is Linux, we are root, and every command is installed."""
    if not hasattr(os, "geteuid") or not Path("/proc").is_dir():
        raise SlurmUnavailable("a local Slurm cluster needs Linux")
    if os.geteuid() != 0:
        raise SlurmUnavailable("a local Slurm cluster needs root (slurmd launches the jobs)")
    missing = [name for name in REQUIRED_COMMANDS if shutil.which(name) is None]
    if missing:
        raise SlurmUnavailable(f"Slurm commands not found: {', '.join(missing)}; {_INSTALL_HINT}")


def processes_of(conf: Path) -> list[int]:
    """The processes (not this one) whose environment names ``conf`` as ``SLURM_CONF``: a cluster's jobs and steps.

    Args:
        conf: a cluster's ``slurm.conf`` (:attr:`LocalSlurm.conf`).

    >>> processes_of(Path("/nowhere/slurm.conf"))
    []
    """
    marker = f"SLURM_CONF={conf}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


class LocalSlurm(Harness):
    """A one-node Slurm cluster of this machine, started by :meth:`start` and stopped by :meth:`stop`.

    Run Slurm's commands against it with :meth:`command` (or any process given
    :attr:`env`); :meth:`sbatch` submits and :meth:`jobs` reads the jobs'
    states (kept ``MinJobAge`` = 600 s after they end).

    Args:
        cpus: the node's slots (default: the machine's CPUs); more than the machine has are allowed.
        startup_timeout: seconds to wait for the node to be idle (default 60).

    Example:
        >>> slurm = LocalSlurm(cpus=2)
        >>> slurm.running
        False
    """

    def __init__(self, cpus: int | None = None, *, startup_timeout: float = 60.0) -> None:
        self.cpus = cpus or os.cpu_count() or 1
        self.startup_timeout = startup_timeout
        self.directory: Path | None = None
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalSlurm(cpus={self.cpus}, directory={str(self.directory)!r}, running={self.running})"

    # -- properties ---------------------------------------------------------------------------

    @property
    def conf(self) -> Path:
        """The cluster's ``slurm.conf`` (known once started)."""
        if self.directory is None:
            raise SlurmUnavailable("LocalSlurm is not started: call start() first")
        return self.directory / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with ``SLURM_CONF`` naming the cluster: give it to Slurm's commands."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def pids(self) -> dict[str, int]:
        """The daemons' process ids by name (``munged``, ``slurmctld``, ``slurmd``), once started."""
        return {name: process.pid for name, process in self._processes.items()}

    @property
    def running(self) -> bool:
        """Whether every daemon of the cluster is alive."""
        return len(self._processes) == len(_DAEMONS) and all(p.poll() is None for p in self._processes.values())

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> LocalSlurm:
        """Start munged, slurmctld and slurmd and wait until the node is idle; returns ``self``.

        Raises :class:`SlurmUnavailable` (with the ends of the daemons' logs)
        when the machine cannot run them or they do not come up within
        ``startup_timeout`` seconds.
        """
        with self._lock:
            if self.running:
                return self
            _check_machine()
            self.directory = Path(tempfile.mkdtemp(prefix="raytuner-slurm-"))
            atexit.register(self.stop)
            try:
                for attempt in range(3):  # a free port may be taken before the daemon binds it
                    try:
                        self._launch()
                        break
                    except SlurmUnavailable as exc:
                        if "Address already in use" not in str(exc) or attempt == 2:
                            raise
                        log.info("a Slurm port was taken (attempt %d); trying others", attempt + 1)
                        self._stop_daemons()
            except BaseException:
                self._stop_locked()
                raise
            log.info("local Slurm started: %s (%d slots)", self.conf, self.cpus)
            return self

    def _launch(self) -> None:
        assert self.directory is not None
        root = self.directory
        root.chmod(0o711)  # munged wants its socket's directory searchable by all
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir(exist_ok=True)
        (root / "munge").chmod(0o711)
        key = root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
            key.chmod(0o400)
        self._write_conf(free_port(), free_port())
        deadline = time.monotonic() + self.startup_timeout
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={self._munge_socket}",
                f"--pid-file={root / 'munge' / 'munged.pid'}",
                f"--log-file={root / 'log' / 'munged.log'}",
                f"--seed-file={root / 'munge' / 'munged.seed'}",
            ],
        )
        self._wait(lambda: self._munge_socket.exists(), "munged did not create its socket", deadline)
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(lambda: self._node_state() == "idle", "the node did not become idle", deadline)

    @property
    def _munge_socket(self) -> Path:
        assert self.directory is not None
        return self.directory / "munge" / "munge.socket"

    def _write_conf(self, controller_port: int, node_port: int) -> None:
        assert self.directory is not None
        root = self.directory
        host = socket.gethostname().split(".")[0]
        lines = {
            "ClusterName": f"raytuner{root.name.rsplit('-', 1)[-1].lower()}"[:40],
            "SlurmctldHost": f"{host}(127.0.0.1)",
            "SlurmctldPort": controller_port,
            "SlurmdPort": node_port,
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "AuthInfo": f"socket={self._munge_socket}",
            "StateSaveLocation": root / "state",
            "SlurmdSpoolDir": root / "spool",
            "SlurmctldPidFile": root / "slurmctld.pid",
            "SlurmdPidFile": root / "slurmd.pid",
            "SlurmctldLogFile": root / "log" / "slurmctld.log",
            "SlurmdLogFile": root / "log" / "slurmd.log",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "AccountingStorageType": "accounting_storage/none",
            "JobCompType": "jobcomp/none",
            "SwitchType": "switch/none",
            "MpiDefault": "none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_CPU",
            "SchedulerType": "sched/backfill",
            # schedule at every submission and job end, not every few seconds
            "SchedulerParameters": "batch_sched_delay=0,sched_min_interval=100000",
            "ReturnToService": 2,
            "KillWait": 2,
            "InactiveLimit": 0,
            "MinJobAge": 600,
        }
        if self.cpus > (os.cpu_count() or 1):
            lines["SlurmdParameters"] = "config_overrides"
        text = "".join(f"{name}={value}\n" for name, value in lines.items())
        text += f"NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN\n"
        text += "PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        self.conf.write_text(text)

    def _spawn(self, name: str, args: list[str]) -> None:
        assert self.directory is not None
        with open(self.directory / "log" / f"{name}.out", "ab") as console:
            # the kernel stops the daemon should this process die (see death_signal_prefix)
            self._processes[name] = subprocess.Popen(
                [*death_signal_prefix(), *args],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                env=self.env,
                close_fds=True,
            )

    def _wait(self, ready: Callable[[], bool], what: str, deadline: float) -> None:
        while not ready():
            dead = [name for name, p in self._processes.items() if p.poll() is not None]
            if dead:
                raise self._failure(f"{dead[0]} exited with status {self._processes[dead[0]].returncode}")
            if time.monotonic() > deadline:
                raise self._failure(f"{what} within {self.startup_timeout:g} s")
            time.sleep(0.1)

    def _node_state(self) -> str:
        done = self.command(["sinfo", "--noheader", "--Node", "--format=%T"], check=False)
        return done.stdout.strip()

    def _failure(self, what: str) -> SlurmUnavailable:
        assert self.directory is not None
        logs = sorted((self.directory / "log").iterdir())
        tails = "\n".join(f"--- {path.name}\n{tail}" for path in logs if (tail := _tail(path)))
        return SlurmUnavailable(f"local Slurm did not start: {what}" + (f"; its logs end:\n{tails}" if tails else ""))

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel the cluster's jobs, stop its daemons and remove its directory.

        Safe to call more than once, and on a cluster that never started.

        Args:
            timeout: seconds to wait for the jobs to end, then for each daemon (default 30).
        """
        with self._lock:
            self._stop_locked(timeout)

    def _stop_locked(self, timeout: float = 30.0) -> None:
        if self.running:
            user = pwd.getpwuid(os.getuid()).pw_name
            self.command(["scancel", f"--user={user}"], check=False)
            deadline = time.monotonic() + timeout
            while self.command(["squeue", "--noheader"], check=False).stdout.strip():
                if time.monotonic() > deadline:
                    log.warning("Slurm jobs still running %g s after scancel; stopping the daemons", timeout)
                    break
                time.sleep(0.2)
        self._stop_daemons(timeout)
        if self.directory is not None:
            self._kill_leftovers()
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
        atexit.unregister(self.stop)

    def _stop_daemons(self, timeout: float = 30.0) -> None:
        for name in reversed(_DAEMONS):
            process = self._processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) did not stop within %g s; killing it", name, process.pid, timeout)
                process.kill()
                process.wait()

    def _kill_leftovers(self) -> None:
        """SIGKILL any process still running with this cluster's ``SLURM_CONF`` (a job step that outlived it)."""
        for pid in processes_of(self.conf):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            log.warning("killed process %d left by the local Slurm", pid)

    # -- using it -----------------------------------------------------------------------------

    def command(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        check: bool = True,
        timeout: float | None = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command (``["squeue", ...]``) against this cluster; its completed process (text).

        Args:
            args: the command and its arguments.
            env: more environment variables for it (``SLURM_CONF`` is set).
            cwd: its working directory (default: this process's).
            check: raise :class:`RaytunerError` (with its stderr) when it fails (default ``True``).
            timeout: seconds before :class:`subprocess.TimeoutExpired` (default 120).
        """
        done = subprocess.run(
            list(args),
            env={**self.env, **(env or {})},
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise RaytunerError(f"{' '.join(args)} exited with status {done.returncode}: {done.stderr.strip()}")
        return done

    def sbatch(
        self, args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None
    ) -> str:
        """Submit a batch job (``sbatch --parsable ARGS``); its job id (an array's: the array job's id).

        Args:
            args: sbatch's arguments: options, then the script and its arguments.
            env: more environment variables for the job (sbatch passes its environment on).
            cwd: where to submit from (the jobs' ``SLURM_SUBMIT_DIR``).
        """
        out = self.command(["sbatch", "--parsable", *args], env=env, cwd=cwd).stdout.strip()
        return out.split(";")[0]

    def jobs(self, job_id: str) -> list[dict[str, str]]:
        """The jobs of ``job_id`` (each task of an array) as ``scontrol show job`` fields (``JobState``, ...).

        Args:
            job_id: a job's id (an array job's: all its tasks).
        """
        done = self.command(["scontrol", "--oneliner", "show", "job", job_id])
        return [
            dict(field.split("=", 1) for field in line.split() if "=" in field)
            for line in done.stdout.splitlines()
            if line.strip()
        ]

    def wait_for_jobs(self, job_id: str, timeout: float = 600.0) -> list[dict[str, str]]:
        """Wait until no job of ``job_id`` is pending or running; their :meth:`jobs` entries.

        Args:
            job_id: a job's id (an array job's: all its tasks).
            timeout: seconds to wait (default 600).

        Raises:
            TimeoutError: some job is still pending or running after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs(job_id)
            if all(job.get("JobState") not in _ACTIVE for job in jobs):
                return jobs
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm job {job_id} still active after {timeout:g} s")
            time.sleep(0.5)


_ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}
