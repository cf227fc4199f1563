"""The message level of the unbalanced families: a query stepped by hand,
its requests carried to ``Server.respond`` (no port), finds what the
networked query finds; bad bytes raise the documented exceptions."""

from __future__ import annotations

import time

import pytest

import psikit
from conftest import norm

NORM = ("trim", "lower")


def carry(query, server) -> int:
    """Steps ``query`` to its end through ``server.respond``; returns the
    number of exchanges."""
    exchanges = 0
    request = query.step()
    while not query.done:
        assert request, "a waiting query has a request to send"
        request = query.step(server.respond(request))
        exchanges += 1
    return exchanges


@pytest.fixture(scope="module")
def he_db(tmp_path_factory, small_sets):
    state = tmp_path_factory.mktemp("he-msg") / "srv"
    labels = {s: f"tier {i % 3}" for i, s in enumerate(small_sets.server)}
    psikit.he.build_db(labels, state, normalize=NORM, client_items=256)
    return state, {norm(k): v for k, v in labels.items()}


def test_he_query_by_message_equals_the_networked_query(he_db, small_sets):
    state, labels = he_db
    with psikit.Server(listen=None, he_state=str(state)) as offline, \
            psikit.Server(he_state=str(state)) as online:
        assert offline.addr is None
        q = psikit.he.Query(small_sets.client, normalize=NORM)
        assert carry(q, offline) == 3  # parameters, OPRF, the query
        got = q.result()
        assert got == {c: labels[norm(c)] for c in small_sets.truth()}
        assert got == psikit.he.query(online.addr, small_sets.client, normalize=NORM)
        # The listening server answers by message too.
        q2 = psikit.he.Query(small_sets.client, normalize=NORM)
        carry(q2, online)
        matches, info = q2.result(details=True)
        assert matches == got and info["label_names"] == ["label"]


def test_filter_query_by_message_keeps_its_cache_current(tmp_path, small_sets):
    state, cache = tmp_path / "srv", tmp_path / "f.cache"
    held = small_sets.server[:-5]
    psikit.filter.setup(held, state, normalize=NORM)
    with psikit.Server(listen=None, filter_state=str(state), reload_secs=0.05) as server:
        q = psikit.filter.Query(small_sets.client, normalize=NORM, cache=cache)
        assert carry(q, server) == 2  # the sync, then the query
        matches, info = q.result(details=True)
        truth = [c for c in small_sets.client if norm(c) in {norm(s) for s in held}]
        assert matches == truth and info["syncs"][0]["kind"] == "full"

        report = psikit.filter.update(state, add=small_sets.server[-5:], normalize=NORM)
        assert not report["rebuilt"], "room for five more items"
        assert server.respond(b"") == b""  # nothing asked, nothing answered
        for _ in range(100):  # until the server's watcher reloads the state
            q = psikit.filter.Query(small_sets.client, normalize=NORM, cache=cache)
            carry(q, server)
            matches, info = q.result(details=True)
            # A delta before the query, or after it if the server reloaded
            # in between (the query is then refused as stale and retried).
            kinds = [s["kind"] for s in info["syncs"]]
            if "delta" in kinds:
                break
            assert kinds == ["up_to_date"]
            time.sleep(0.05)
        assert "delta" in kinds
        assert matches == small_sets.truth()


def test_bad_bytes_at_the_message_level_raise(he_db, tmp_path):
    state, _ = he_db
    with psikit.Server(listen=None, he_state=str(state)) as server:
        # The server answers garbage with an error message, never silence.
        answer = server.respond(b"\x00\x00\x00\x09not a frame at all")
        assert answer
        q = psikit.he.Query(["a@x.org"])
        q.step()
        q.step(answer)
        assert q.done
        with pytest.raises(psikit.ProtocolError):
            q.result()
        # A request cut short is refused by the server; the query says so.
        q = psikit.he.Query(["a@x.org"])
        request = q.step()
        q.step(server.respond(request[:-1]), peer_closed=True)
        assert q.done
        with pytest.raises(psikit.ProtocolError):
            q.result()
        unfinished = psikit.filter.Query(["a"])
        unfinished.step()
        with pytest.raises(psikit.InputError, match="not finished"):
            unfinished.result()
    with pytest.raises(psikit.InputError, match="closed"):
        server.respond(b"\x00")
