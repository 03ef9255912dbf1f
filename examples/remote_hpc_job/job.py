"""The Python variant of job.sh: a batch job that tunes program.py through the raytuner service.

    export RAYTUNER_SERVER=tuner.example.org:50051 RAYTUNER_API_KEY=rt_...
    python examples/remote_hpc_job/job.py [--session ID] [--max-trials N]

RemoteTuner.run asks for a configuration, runs the objective (renewing the
trial's lease with heartbeats meanwhile, so a killed job's trial goes to the
next job once its lease ends), tells the measured runtime (an exception is told as a failed trial) until the session
is finished; the machine (Slurm allocation included) and software versions
go with every result. Without --session (or $RAYTUNER_SESSION) the job
creates a session from meta.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from program import measure

from raytuner.client.remote import RemoteTuner


def objective(config: dict[str, Any], task: dict[str, Any], fidelity: float | None) -> dict[str, float]:
    """The measured runtime of the blocked product with this configuration on this task."""
    return {"runtime": measure(task["n"], config["block"], config["loop_order"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("RAYTUNER_SERVER"))
    parser.add_argument("--session", default=os.environ.get("RAYTUNER_SESSION"))
    parser.add_argument("--engine", default="random", help="for a new session")
    parser.add_argument("--n", type=int, default=256, help="the task of a new session")
    parser.add_argument("--max-evaluations", type=int, default=20, help="budget of a new session")
    parser.add_argument("--max-trials", type=int, default=None, help="stop this job after this many trials")
    parser.add_argument(
        "--lease",
        type=float,
        default=float(os.environ["LEASE"]) if os.environ.get("LEASE") else None,
        help="lease time in seconds of a new session (default: $LEASE, else the server's)",
    )
    args = parser.parse_args(argv)
    if not args.server:
        parser.error("give --server or set RAYTUNER_SERVER")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    ca = os.environ.get("RAYTUNER_TLS_CA")
    with RemoteTuner(
        args.server,
        os.environ.get("RAYTUNER_API_KEY") or None,
        session_id=args.session,
        root_certificates=Path(ca).read_bytes() if ca else None,
    ) as tuner:
        if tuner.session_id is None:
            tuner.create_session(
                HERE / "meta.json",
                args.engine,
                tasks=[{"n": args.n}],
                max_evaluations=args.max_evaluations,
                lease_seconds=args.lease,
            )
            print(f"created session {tuner.session_id}")
        ran = tuner.run(objective, max_trials=args.max_trials)
        session = tuner.session()
        print(
            f"ran {ran} trial(s); session {session['session_id']}: {session['evaluations']} evaluations, "
            f"finished: {session['finished']}"
        )
        for best in session["best"]:
            print("best:", json.dumps(best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
