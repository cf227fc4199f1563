"""A sharded HE database served by Python servers (one per shard and a
router) answers as the whole database, also after an update."""

from __future__ import annotations

import time

import psikit
from conftest import norm

NORM = ("trim", "lower")


def test_sharded_database_answers_as_the_whole(tmp_path, small_sets):
    labels = {s: f"t{i % 5}" for i, s in enumerate(small_sets.server)}
    psikit.he.build_db(labels, tmp_path / "whole", normalize=NORM, client_items=256)
    report = psikit.he.build_db(labels, tmp_path / "sharded", normalize=NORM, client_items=256, shards=2)
    assert report["shards"] == 2 and report["items"] == len(labels) and report["epoch"] == 0
    assert sum(report["items_per_shard"]) == len(labels)
    shard_dirs = [tmp_path / "sharded" / f"shard-{i}" for i in range(2)]
    with psikit.Server(he_state=str(tmp_path / "whole")) as whole, \
            psikit.Server(he_state=str(shard_dirs[0])) as s0, \
            psikit.Server(he_state=str(shard_dirs[1])) as s1, \
            psikit.Server(he_router=str(tmp_path / "sharded" / "router"), he_shards=[s0.addr, s1.addr],
                          reload_secs=0.05) as router:
        want = psikit.he.query(whole.addr, small_sets.client, normalize=NORM)
        assert want == {c: labels[next(s for s in labels if norm(s) == norm(c))] for c in small_sets.truth()}
        assert psikit.he.query(router.addr, small_sets.client, normalize=NORM) == want

        gone = small_sets.truth()[0]
        update = psikit.he.update_db(tmp_path / "sharded", remove=[gone], normalize=NORM)
        assert update["epoch"] == 1 and update["removed"] == 1
        want = {c: v for c, v in want.items() if norm(c) != norm(gone)}
        for _ in range(100):  # until the router reloads its manifest
            got = psikit.he.query(router.addr, small_sets.client, normalize=NORM)
            if got == want:
                break
            time.sleep(0.05)
        assert got == want
