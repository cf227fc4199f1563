"""psikit.scale on a local single-node Ray cluster: a sharded database
built by Ray workers and served by shard actors answers as the whole
database, and a shard actor killed mid-service comes back on its own.
Skipped without Ray (``pip install 'psikit[ray]'``)."""

from __future__ import annotations

import time

import pytest

import psikit
from conftest import norm, write_csv

ray = pytest.importorskip("ray")
import psikit.scale  # noqa: E402 - after the skip

NORM = ("trim", "lower")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_database_built_and_served_on_ray_answers_as_the_whole(cluster, tmp_path, small_sets):
    rows = [(s, f"tier {i % 3:03d}") for i, s in enumerate(small_sets.server)]
    server_csv = write_csv(tmp_path / "server.csv", ["email", "tier"], rows)
    psikit.he.build_db(server_csv, tmp_path / "whole", key="email", label="tier", normalize=NORM,
                       client_items=256)
    with psikit.Server(he_state=str(tmp_path / "whole")) as whole:
        want = psikit.he.query(whole.addr, small_sets.client, normalize=NORM)
    assert want and "tier 000" in want.values(), "labels stay strings (no type inference)"

    report = psikit.scale.build(server_csv, tmp_path / "big", shards=4, key="email", label="tier",
                                normalize=NORM, workers=2, client_items=256, batch_rows=128)
    assert report["items"] == len({norm(s) for s in small_sets.server})
    assert len(report["items_per_shard"]) == 4 and min(report["items_per_shard"]) > 0
    assert not (tmp_path / "big" / "shard-0" / "oprf.key").exists()

    with psikit.scale.serve(tmp_path / "big") as deployment:
        assert psikit.he.query(deployment.addr, small_sets.client, normalize=NORM) == want
        # A shard server dies: queries fail (never a partial answer) until
        # Ray restarts it from its files, on the same address.
        ray.kill(deployment.shards[1], no_restart=False)
        answers, failures = [], 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                answers.append(psikit.he.query(deployment.addr, small_sets.client, normalize=NORM, timeout=10))
                break
            except psikit.ProtocolError:
                failures += 1
                time.sleep(0.5)
        assert answers == [want]
