"""Shared fixtures: generated data sets with a known intersection, and
helpers to run two parties in threads over loopback.

These tests run against the *installed* package (scripts/test.sh installs
the wheel into a fresh virtual environment and runs pytest from outside
the source tree); test_installed.py checks that.
"""

from __future__ import annotations

import csv
import random
import socket
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Tuple

import pytest


def norm(s: str) -> str:
    """What ``normalize=("trim", "lower")`` does to ASCII test data."""
    return s.strip().lower()


@dataclass
class Sets:
    server: List[str]
    client: List[str]  # noisy spellings (case, spaces), duplicates included

    def truth(self) -> List[str]:
        """The client's items whose normalised key the server holds, in order."""
        held = {norm(s) for s in self.server}
        return [c for c in self.client if norm(c) in held]


def make_sets(n_server: int, n_client: int, overlap: int, seed: int) -> Sets:
    rng = random.Random(seed)
    server = [f"user{rng.getrandbits(48):012x}@example.org" for _ in range(n_server)]
    client = [f"other{rng.getrandbits(48):012x}@example.net" for _ in range(n_client - overlap)]
    for s in rng.sample(server, overlap):
        noisy = s.upper() if rng.random() < 0.5 else f"  {s} "
        client.append(noisy)
    client.append(client[0])  # a duplicate row
    client.append("   ")  # a row with an empty key: skipped
    rng.shuffle(client)
    return Sets(server, client)


@pytest.fixture(scope="session")
def sets() -> Sets:
    return make_sets(3000, 300, 120, seed=13)


@pytest.fixture(scope="session")
def small_sets() -> Sets:
    return make_sets(600, 200, 70, seed=7)


def write_csv(path, header: List[str], rows: List[Tuple[Any, ...]]) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_parties(receiver: Callable[..., Any], sender: Callable[..., Any]) -> Tuple[Any, Any]:
    """Runs ``receiver(listen=..., on_listening=...)`` in a thread and, once
    it listens, ``sender(connect=addr)`` in this thread; returns both
    results (re-raising either party's exception)."""
    listening = threading.Event()
    addr: List[str] = []
    out: dict = {}

    def on_listening(a: str) -> None:
        addr.append(a)
        listening.set()

    def run() -> None:
        try:
            out["receiver"] = receiver(listen="127.0.0.1:0", on_listening=on_listening, accept_timeout=60)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            out["receiver_error"] = e
            listening.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert listening.wait(60), "the receiver never listened"
    if "receiver_error" in out:
        raise out["receiver_error"]
    try:
        sent = sender(connect=addr[0])
    finally:
        t.join(120)
    assert not t.is_alive(), "the receiver did not finish"
    if "receiver_error" in out:
        raise out["receiver_error"]
    return out["receiver"], sent
