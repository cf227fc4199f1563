"""Long-lived clients: an HE client keeping its keys across queries and a
new database, and both clients from asyncio."""

from __future__ import annotations

import asyncio

import psikit
from conftest import norm

NORM = ("trim", "lower")


def test_he_client_keeps_its_keys_and_follows_a_rebuilt_database(tmp_path, small_sets):
    state = tmp_path / "srv"
    labels = {s: f"tier {i % 3}" for i, s in enumerate(small_sets.server)}
    psikit.he.build_db(labels, state, normalize=NORM, client_items=256)
    want = {c: labels[next(s for s in small_sets.server if norm(s) == norm(c))] for c in small_sets.truth()}
    with psikit.Server(he_state=str(state), reload_secs=0.05) as server:
        client = psikit.he.Client(server.addr)
        got, info = client.query(small_sets.client, normalize=NORM, details=True)
        assert got == want and info["setup_secs"] > 0
        got, info = client.query(small_sets.client, normalize=NORM, details=True)
        assert got == want and info["setup_secs"] == 0, "the kept keys were used"

        # A new database (a new OPRF key) in the same directory: the kept
        # keys are refused as stale and the client fetches new ones.
        relabelled = {s: "new" for s in small_sets.server}
        psikit.he.build_db(relabelled, state, normalize=NORM, client_items=256, force=True)
        for _ in range(200):  # until the server's watcher reloads it
            got, info = client.query(small_sets.client, normalize=NORM, details=True)
            if info["setup_secs"] > 0:
                break
            asyncio.run(asyncio.sleep(0.05))
        assert got == {c: "new" for c in small_sets.truth()}
        assert info["setup_secs"] > 0


def test_clients_from_asyncio(tmp_path, small_sets):
    psikit.filter.setup(small_sets.server, tmp_path / "f", normalize=NORM)
    psikit.he.build_db(small_sets.server, tmp_path / "h", normalize=NORM, client_items=256)

    async def main(addr):
        fc = psikit.filter.Client(addr, cache=tmp_path / "f.cache")
        hc = psikit.he.Client(addr)
        sync = await fc.sync_async()
        matches, he_matches = await asyncio.gather(
            fc.query_async(small_sets.client, normalize=NORM),
            hc.query_async(small_sets.client, normalize=NORM),
        )
        return sync, matches, he_matches

    with psikit.Server(filter_state=str(tmp_path / "f"), he_state=str(tmp_path / "h")) as server:
        sync, matches, he_matches = asyncio.run(main(server.addr))
    assert sync["kind"] == "full"
    assert matches == small_sets.truth()
    assert he_matches == small_sets.truth()
