"""The filter family end to end against the plaintext truth."""

from __future__ import annotations

import time

import pytest

import psikit
from conftest import norm, write_csv

NORM = ("trim", "lower")


@pytest.fixture(scope="module")
def served(tmp_path_factory, sets):
    state = tmp_path_factory.mktemp("filter") / "srv"
    report = psikit.filter.setup(sets.server, state, normalize=NORM)
    assert report["items"] == len(sets.server)
    with psikit.Server(filter_state=str(state), reload_secs=0.1) as server:
        yield state, server


def test_query_list_matches_truth(served, sets):
    _, server = served
    got = psikit.filter.query(server.addr, sets.client, normalize=NORM)
    assert got == sets.truth()
    assert len(got) > 100


def test_query_details_and_cache(served, sets, tmp_path):
    _, server = served
    cache = tmp_path / "filter.cache"
    got, info = psikit.filter.query(server.addr, sets.client, normalize=NORM, cache=cache, details=True)
    assert got == sets.truth()
    assert info["syncs"][0]["kind"] == "full"
    assert info["distinct"] == len(set(sets.client)) - 1  # the empty key is skipped
    assert info["rows_skipped"] == 1
    _, again = psikit.filter.query(server.addr, sets.client[:10], normalize=NORM, cache=cache, details=True)
    assert again["syncs"][0]["kind"] == "up_to_date"


def test_csv_path_gives_dicts(served, sets, tmp_path):
    _, server = served
    rows = [(i, c) for i, c in enumerate(sets.client)]
    path = write_csv(tmp_path / "client.csv", ["id", "email"], rows)
    got = psikit.filter.query(server.addr, path, key="email", normalize=NORM)
    assert [d["email"] for d in got] == sets.truth()
    assert set(got[0]) == {"id", "email"}


def test_update_is_served_live(tmp_path, small_sets):
    state = tmp_path / "srv"
    psikit.filter.setup(small_sets.server, state, normalize=NORM)
    added = ["new1@example.org", "new2@example.org"]
    removed = small_sets.server[:50]
    with psikit.Server(filter_state=str(state), reload_secs=0.1) as server:
        before = psikit.filter.query(server.addr, small_sets.client + added, normalize=NORM)
        assert before == small_sets.truth()
        report = psikit.filter.update(state, add=added, remove=removed, normalize=NORM)
        assert (report["added"], report["removed"], report["epoch"]) == (2, 50, 1)
        held = {norm(s) for s in small_sets.server[50:]} | set(added)
        want = [c for c in small_sets.client + added if norm(c) in held]
        cache = tmp_path / "c.cache"
        deadline = time.monotonic() + 20
        while True:
            got, info = psikit.filter.query(
                server.addr, small_sets.client + added, normalize=NORM, cache=cache, details=True
            )
            if got == want or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got == want
        assert info["syncs"][-1]["epoch"] == 1


def test_composite_keys(tmp_path):
    server = [("Ann", "Lee", "1990"), ("Bo", "Chan", "1985"), ("Cy", "Diaz", "1970")]
    client = [("ann ", "LEE", "1990"), ("Bo", "Chan", "1986"), ("CY", "diaz", "1970")]
    psikit.filter.setup(server, tmp_path / "srv", normalize=NORM)
    with psikit.Server(filter_state=str(tmp_path / "srv")) as s:
        assert psikit.filter.query(s.addr, client, normalize=NORM) == [client[0], client[2]]


def test_client_object_keeps_its_filter(tmp_path, small_sets):
    state = tmp_path / "srv"
    psikit.filter.setup(small_sets.server, state, normalize=NORM)
    with psikit.Server(filter_state=str(state), reload_secs=0.1) as server:
        client = psikit.filter.Client(server.addr)
        assert client.sync()["kind"] == "full"
        assert client.query(small_sets.client, normalize=NORM) == small_sets.truth()
        _, info = client.query(small_sets.client[:5], normalize=NORM, details=True)
        assert [s["kind"] for s in info["syncs"]] == ["up_to_date"]
        psikit.filter.update(state, add=["late@example.org"], normalize=NORM)
        deadline = time.monotonic() + 20
        while client.query(["late@example.org"], normalize=NORM) != ["late@example.org"]:
            assert time.monotonic() < deadline, "the update never reached the client"
            time.sleep(0.1)
        assert client.sync()["kind"] == "up_to_date"


def test_damaged_cache_is_replaced(tmp_path, small_sets):
    state = tmp_path / "srv"
    psikit.filter.setup(small_sets.server, state, normalize=NORM)
    cache = tmp_path / "f.cache"
    cache.write_bytes(b"not a filter cache")
    with psikit.Server(filter_state=str(state)) as server:
        client = psikit.filter.Client(server.addr, cache=cache)
        assert client.discarded_cache
        assert client.query(small_sets.client, normalize=NORM) == small_sets.truth()
    assert psikit.filter.Client("127.0.0.1:1", cache=cache).discarded_cache is None


def test_tag_cache_asks_only_for_new_items(tmp_path, small_sets):
    state = tmp_path / "srv"
    psikit.filter.setup(small_sets.server, state, normalize=NORM)
    tags = tmp_path / "tags"
    with psikit.Server(filter_state=str(state), reload_secs=0.1) as server:
        client = psikit.filter.Client(server.addr, tag_cache=tags)
        got, first = client.query(small_sets.client, normalize=NORM, details=True)
        assert got == small_sets.truth()
        assert first["cached"] == 0
        assert (tags.stat().st_mode & 0o777) == 0o600
        grown = small_sets.client + ["late@example.org"]
        got, again = psikit.filter.query(server.addr, grown, normalize=NORM, tag_cache=tags, details=True)
        assert got == small_sets.truth()
        assert again["cached"] == first["distinct"]
        assert again["bytes_sent"] * 10 < first["bytes_sent"]
    tags.write_bytes(b"garbage")
    assert psikit.filter.Client("127.0.0.1:1", tag_cache=tags).discarded_tag_cache


def _upgrade(addr, origin):
    """The status line of a WebSocket upgrade request from a page at
    ``origin`` (as a browser sends it) to ``addr``."""
    import socket

    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(
            (
                f"GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                f"Origin: {origin}\r\n\r\n"
            ).encode()
        )
        return s.recv(4096).split(b"\r\n", 1)[0].decode()


def test_websocket_listener_checks_the_page_origin(tmp_path, small_sets):
    state = tmp_path / "srv"
    psikit.filter.setup(small_sets.server, state, normalize=NORM)
    page = "https://contacts.example.org"
    with psikit.Server(filter_state=str(state), ws_listen="127.0.0.1:0", ws_allow_origin=[page]) as server:
        assert server.ws_addr and server.ws_addr != server.addr
        assert " 101 " in _upgrade(server.ws_addr, page)
        assert " 403 " in _upgrade(server.ws_addr, "https://elsewhere.example")
        # The TCP listener serves as before.
        assert psikit.filter.query(server.addr, small_sets.client, normalize=NORM) == small_sets.truth()
    with pytest.raises(psikit.InputError, match="scheme"):
        psikit.Server(filter_state=str(state), ws_listen="127.0.0.1:0", ws_allow_origin=["example.org"])
