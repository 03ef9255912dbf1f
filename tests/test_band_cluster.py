"""GPTuneBand through tune.run on a two-node Ray cluster started on this machine (ray start --head + a worker)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ray._common.utils import get_ray_address_file
from record_helpers import known

from raytuner.errors import InvalidInputError
from raytuner.testing.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


def test_band_demo_on_a_two_node_cluster_uses_both_nodes_and_stops_them(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/band_demo.py"),
            "--store",
            str(tmp_path / "store"),
            "--local-cluster",
            "2",
            "--tasks",
            "1.0",
            "--b-min",
            "9",
            "--seconds",
            "0.5",
            "--passes",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    trials = json.loads(known(re.search(r"Trials per Ray node: (\{.*\})", out)).group(1).replace("'", '"'))
    fits = json.loads(known(re.search(r"LCM fit starts per Ray node: (\{.*\})", out)).group(1).replace("'", '"'))
    assert "Ray nodes alive: 2" in out
    assert len(trials) == 2 and all(n > 0 for n in trials.values())  # trials ran on both nodes
    assert len(fits) == 2 and all(n > 0 for n in fits.values())  # and so did the LCM fits
    assert max(fits.values()) - min(fits.values()) <= 1  # evenly: pinned, not soft
    assert sum(trials.values()) == 6  # [9, 27, 3]: 2 + 3 + 1 per task
    assert "Best configuration per task at b_max" in out
    address = known(re.search(r"Local Ray cluster at (\S+) stopped", out)).group(1)
    assert not listening(address)  # the cluster is gone
    # and so is Ray's note of it, which would send a later plain ray.init(num_cpus=...) to the dead cluster
    note = Path(get_ray_address_file(None))
    assert not note.exists() or note.read_text().strip().rsplit(":", 1)[-1] != address.rsplit(":", 1)[-1]


def test_the_local_cluster_option_says_it_is_slower_than_one_node() -> None:
    # on one machine a cluster of one-CPU nodes is slower than the single-node run; its help did not say so
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples/band_demo.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = " ".join(proc.stdout.split())  # argparse wraps the help to the terminal's width
    assert "slower than the single-node run" in text[text.index("--local-cluster NODES start") :]


def test_local_cluster_rejects_bad_node_lists() -> None:
    with pytest.raises(InvalidInputError) as err:
        LocalCluster(nodes=[1, -1])
    assert err.value.field == "nodes"
