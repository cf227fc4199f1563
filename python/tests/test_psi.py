"""Balanced two-party PSI (VOLE-PSI and RR16) end to end against the
plaintext truth, both parties in this process over loopback."""

from __future__ import annotations

import functools

import pytest

import psikit
from conftest import two_parties, write_csv

NORM = ("trim", "lower")

MODES = [("vole", False), ("vole", True), ("rr16", False), ("rr16", True)]


@pytest.mark.parametrize("protocol,malicious", MODES)
def test_receiver_learns_the_intersection(protocol, malicious, small_sets):
    kw = dict(protocol=protocol, malicious=malicious, normalize=NORM)
    got, sent = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, **kw),
        functools.partial(psikit.psi.send, small_sets.server, **kw),
    )
    assert got == small_sets.truth()
    assert sent is None


def test_reveal_gives_the_sender_its_rows(small_sets):
    kw = dict(reveal=True, normalize=NORM)
    got, sent = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, **kw),
        functools.partial(psikit.psi.send, small_sets.server, **kw),
    )
    assert got == small_sets.truth()
    held = {c.strip().lower() for c in small_sets.client}
    assert sent == [s for s in small_sets.server if s in held]


def test_sender_may_listen_and_tables_come_back(small_sets, tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"email": small_sets.client, "n": range(len(small_sets.client))})
    # The sender listens this time; the receiver connects.
    sent, got = two_parties(
        functools.partial(psikit.psi.send, small_sets.server, normalize=NORM),
        functools.partial(psikit.psi.receive, df, key="email", normalize=NORM),
    )
    assert sent is None
    assert list(got["email"]) == small_sets.truth()
    path = write_csv(tmp_path / "s.csv", ["email"], [(s,) for s in small_sets.server])
    got, _ = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, normalize=NORM, protocol="rr16"),
        functools.partial(psikit.psi.send, path, key="email", normalize=NORM, protocol="rr16"),
    )
    assert got == small_sets.truth()


def test_other_settings_are_refused(small_sets):
    with pytest.raises(psikit.ProtocolError):
        two_parties(
            functools.partial(psikit.psi.receive, small_sets.client, normalize=NORM),
            functools.partial(psikit.psi.send, small_sets.server, normalize="trim"),
        )


def exchange(a, b, max_rounds=10_000):
    """Carries the two parties' bytes to each other until both finish."""
    to_b, to_a = a.step(), b.step()
    rounds = 0
    while not (a.done and b.done):
        to_b, to_a = a.step(to_a), b.step(to_b)
        rounds += 1
        assert rounds < max_rounds, "the parties made no progress"


@pytest.mark.parametrize("protocol,malicious", MODES)
def test_message_level_parties(protocol, malicious, small_sets):
    kw = dict(protocol=protocol, malicious=malicious, normalize=NORM, reveal=True)
    receiver = psikit.psi.Party("receive", small_sets.client, **kw)
    sender = psikit.psi.Party("send", small_sets.server, **kw)
    exchange(receiver, sender)
    assert receiver.result() == small_sets.truth()
    held = {c.strip().lower() for c in small_sets.client}
    assert sender.result() == [s for s in small_sets.server if s in held]
    assert receiver.result() == small_sets.truth()  # may be asked again


def test_message_level_bytes_in_any_split(small_sets):
    receiver = psikit.psi.Party("receive", small_sets.client, normalize=NORM)
    sender = psikit.psi.Party("send", small_sets.server, normalize=NORM)
    to_b, to_a = receiver.step(), sender.step()
    while not (receiver.done and sender.done):
        a_in, b_in = to_a, to_b
        to_b, to_a = b"", b""
        for i in range(0, max(len(a_in), 1), 1000):  # 1000-byte pieces
            to_b += receiver.step(a_in[i:i + 1000])
        for i in range(0, max(len(b_in), 1), 1000):
            to_a += sender.step(b_in[i:i + 1000])
    assert receiver.result() == small_sets.truth()


def test_message_level_malformed_bytes_raise():
    party = psikit.psi.Party("receive", ["a", "b"])
    party.step()
    party.step(b"\x00\x00\x00\x05garbage-that-is-no-frame")
    assert party.done
    with pytest.raises(psikit.ProtocolError):
        party.result()
    with pytest.raises(psikit.ProtocolError):
        party.result()
    unfinished = psikit.psi.Party("send", ["a"])
    unfinished.step()
    with pytest.raises(psikit.InputError, match="not finished"):
        unfinished.result()
    closed = psikit.psi.Party("send", ["a"])
    closed.step()
    closed.step(peer_closed=True)
    assert closed.done
    with pytest.raises(psikit.ProtocolError):
        closed.result()
