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
    # On loopback only (as psikit.scale starts a Ray of its own): the shard
    # servers announce the node's address.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, **psikit.scale._loopback_node())
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
    assert not (tmp_path / "big" / psikit.scale.SPOOL).exists(), "the spool goes once the shards are built"
    assert report["rows_read"] == len(small_sets.server) and report["oprf_rows_per_sec"] > 0

    with psikit.scale.serve(tmp_path / "big") as deployment:
        assert all(a.startswith("127.") for a in deployment.shard_addrs), deployment.shard_addrs
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

        # An update on Ray equals the same update of the whole database;
        # the served deployment switches to it.
        gone = small_sets.server[:40]
        changed = [(s, "tier new") for s in small_sets.server[40:60]] + [("fresh@x.org", "tier 009")]
        remove_csv = write_csv(tmp_path / "remove.csv", ["email"], [(s,) for s in gone])
        add_csv = write_csv(tmp_path / "add.csv", ["email", "tier"], changed)
        psikit.he.update_db(tmp_path / "whole", add=add_csv, remove=remove_csv, key="email", label="tier",
                            normalize=NORM)
        updated = psikit.scale.update(tmp_path / "big", add=add_csv, remove=remove_csv, key="email",
                                      label="tier", normalize=NORM, workers=2, batch_rows=16)
        assert updated["epoch"] == 1 and updated["removed"] == len({norm(s) for s in gone})
        client = small_sets.client + [s for s, _ in changed]
        with psikit.Server(he_state=str(tmp_path / "whole")) as whole:
            want = psikit.he.query(whole.addr, client, normalize=NORM)
        assert "tier new" in want.values()
        deadline = time.monotonic() + 60
        while (got := psikit.he.query(deployment.addr, client, normalize=NORM)) != want:
            assert time.monotonic() < deadline, "the router switched to the update"
            time.sleep(0.5)
        with pytest.raises(psikit.InputError, match="labels"):
            psikit.scale.update(tmp_path / "big", add=add_csv, key="email", normalize=NORM)


def test_a_filter_set_up_on_ray_answers_as_one_set_up_in_one_process(cluster, tmp_path, small_sets):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    server_csv = write_csv(tmp_path / "server.csv", ["email"], [(s,) for s in small_sets.server])
    whole = psikit.filter.setup(server_csv, tmp_path / "whole", key="email", normalize=NORM)
    # Parquet in two files, read as one stream split between the workers.
    half = len(small_sets.server) // 2
    for i, part in enumerate([small_sets.server[:half], small_sets.server[half:]]):
        pq.write_table(pyarrow.table({"email": part}), tmp_path / f"part-{i}.parquet")
    parts = [str(tmp_path / f"part-{i}.parquet") for i in range(2)]
    staged = psikit.scale.filter_setup(parts, tmp_path / "staged", key="email", normalize=NORM, workers=2,
                                       batch_rows=100)
    assert (staged["items"], staged["duplicates"]) == (whole["items"], whole["duplicates"])
    assert staged["rows_read"] == len(small_sets.server)
    assert not (tmp_path / ".staged.staging").exists(), "the key and the spool are gone"

    with psikit.Server(filter_state=str(tmp_path / "whole")) as s:
        want = psikit.filter.query(s.addr, small_sets.client, normalize=NORM)
    with psikit.Server(filter_state=str(tmp_path / "staged")) as s:
        got = psikit.filter.query(s.addr, small_sets.client, normalize=NORM)
    assert got == want and len(want) >= 70
    with pytest.raises(psikit.InputError, match="not empty"):
        psikit.scale.filter_setup(parts, tmp_path / "staged", key="email", normalize=NORM)
