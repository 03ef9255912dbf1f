#!/usr/bin/env bash
#SBATCH --job-name=raytuner-blocked-matmul
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --time=00:30:00
#SBATCH --output=raytuner-%j.out
#
# A batch job that tunes a real program through the raytuner service:
# ask for a configuration, run program.py with it, tell the measured runtime,
# until the session is finished (or MAX_TRIALS trials were run).
#
#   export RAYTUNER_SERVER=tuner.example.org:50051 RAYTUNER_API_KEY=rt_...
#   sbatch examples/remote_hpc_job/job.sh          # under Slurm
#   bash examples/remote_hpc_job/job.sh            # anywhere else
#
# RAYTUNER_SESSION names the session to work for; without it the job creates
# one from meta.json (ENGINE, N, MAX_EVALUATIONS). Several jobs may work for
# the same session at once.
#
# Each raytuner call retries for up to RAYTUNER_RETRY_FOR seconds (default 150), so the job
# outlives a restart of the tuning service.
#
# While program.py runs, and until its tell is acknowledged, `raytuner heartbeat --every HEARTBEAT_EVERY`
# renews the trial's lease in the background (default: a third of the session's lease time, LEASE_SECONDS
# from `raytuner ask`).
# If the job dies (scancel, a node failure, the time limit) the heartbeats stop, and once the lease
# ends the service hands the trial to the next job that asks. LEASE sets the lease time (seconds)
# of a session this job creates (default: the server's, 300; 0: trials never expire).
set -euo pipefail

: "${RAYTUNER_SERVER:?set RAYTUNER_SERVER=host:port of the tuning service}"
export RAYTUNER_SERVER
export RAYTUNER_API_KEY=${RAYTUNER_API_KEY:-}
RAYTUNER=${RAYTUNER:-raytuner}                 # may be a command with arguments: "python -m raytuner.cli"
PYTHON=${PYTHON:-python3}
MAX_TRIALS=${MAX_TRIALS:-0}                    # 0: until the session is finished
TRIAL_TIMEOUT=${TRIAL_TIMEOUT:-300}            # seconds one run of the program may take
LEASE=${LEASE:-}                               # lease time of a session this job creates (empty: the server's)
HEARTBEAT_EVERY=${HEARTBEAT_EVERY:-}           # seconds between heartbeats (empty: a third of the lease)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -f "$HERE/program.py" ] || HERE=${SLURM_SUBMIT_DIR:-.}/examples/remote_hpc_job   # sbatch runs a copy
LAUNCH=()
[ -n "${SLURM_JOB_ID:-}" ] && LAUNCH=(srun --ntasks=1 --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}")

if [ -z "${RAYTUNER_SESSION:-}" ]; then
    RAYTUNER_SESSION=$($RAYTUNER session create --meta "$HERE/meta.json" --engine "${ENGINE:-random}" \
        --task "n=${N:-256}" --max-evaluations "${MAX_EVALUATIONS:-20}" ${LEASE:+--lease "$LEASE"})
    echo "created session $RAYTUNER_SESSION"
fi
export RAYTUNER_SESSION

beat=
stop_heartbeat() {                             # end the background heartbeat of the trial, if any
    if [ -n "$beat" ]; then
        kill "$beat" 2>/dev/null || true
        wait "$beat" 2>/dev/null || true
        beat=
    fi
}
trap stop_heartbeat EXIT

trials=0
while [ "$MAX_TRIALS" -eq 0 ] || [ "$trials" -lt "$MAX_TRIALS" ]; do
    rc=0
    assignments=$($RAYTUNER ask --format env) || rc=$?
    if [ "$rc" -eq 3 ]; then
        echo "the session is finished"
        break
    elif [ "$rc" -ne 0 ]; then
        echo "raytuner ask failed (exit status $rc)" >&2
        exit "$rc"
    fi
    eval "$assignments"                        # TRIAL_ID, FIDELITY, LEASE_SECONDS, TASK_n, block, loop_order
    trials=$((trials + 1))
    echo "trial $TRIAL_ID: n=$TASK_n block=$block loop_order=$loop_order"
    every=${HEARTBEAT_EVERY:-$(awk -v lease="${LEASE_SECONDS:-0}" 'BEGIN { e = lease / 3; print (e < 0.2 ? 0.2 : e) }')}
    if [ "${LEASE_SECONDS:-0}" != "0" ] && [ "${LEASE_SECONDS:-0}" != "0.0" ]; then
        $RAYTUNER heartbeat --trial "$TRIAL_ID" --every "$every" --while-pid $$ >/dev/null &
        beat=$!
    fi
    rc=0
    runtime=$(${LAUNCH[@]+"${LAUNCH[@]}"} timeout "$TRIAL_TIMEOUT" \
        "$PYTHON" "$HERE/program.py" --n "$TASK_n" --block "$block" --loop-order "$loop_order") || rc=$?
    # the heartbeat runs on until the tell is acknowledged: the tell's own start-up (seconds on a busy node)
    # must not let the lease run out, or the trial is handed out again and run twice
    if [ "$rc" -eq 0 ]; then
        echo "  runtime $runtime s"
        $RAYTUNER tell --trial "$TRIAL_ID" --value "$runtime" --output runtime --extra "job=${SLURM_JOB_ID:-local}"
    elif [ "$rc" -eq 124 ]; then
        $RAYTUNER tell --trial "$TRIAL_ID" --failed "timed out after ${TRIAL_TIMEOUT} s"
    elif [ "$rc" -eq 143 ]; then               # SIGTERM from outside (scancel, the job's time limit): the job
        echo "program.py was stopped (SIGTERM); its trial goes to another job when its lease ends" >&2
        exit "$rc"                             # ends; the configuration is not at fault, so tell nothing
    else
        $RAYTUNER tell --trial "$TRIAL_ID" --failed "program.py exited with status $rc"
    fi
    stop_heartbeat
done
echo "ran $trials trial(s); best so far:"
$RAYTUNER session best
