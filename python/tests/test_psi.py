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
