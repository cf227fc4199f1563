"""Progress reports of long calls (callbacks and tqdm bars) and stopping
CPU-bound jobs (set-ups, builds, updates) from Python: Ctrl-C, a callback
that raises ``KeyboardInterrupt``, a cancelled asyncio token."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import types
from typing import Dict, List, Optional, Tuple

import pytest

import psikit
from psikit import _native
from conftest import two_parties

NORM = ("trim", "lower")

Report = Tuple[str, int, Optional[int]]


class Recorder:
    """A progress callback that keeps every report."""

    def __init__(self) -> None:
        self.reports: List[Report] = []

    def __call__(self, stage: str, done: int, total: Optional[int]) -> None:
        self.reports.append((stage, done, total))

    def stages(self) -> List[str]:
        """The stages in order, each once per start."""
        return [s for s, done, _ in self.reports if done == 0]


def state_files(path) -> Dict[str, bytes]:
    """The state in a directory: every file but the lock."""
    if not os.path.isdir(path):
        return {}
    return {
        name: open(os.path.join(path, name), "rb").read()
        for name in sorted(os.listdir(path))
        if name != ".psikit.lock"
    }


@pytest.mark.parametrize("protocol", ["vole", "rr16"])
def test_both_parties_of_a_run_report_their_stages(protocol, small_sets):
    receiver, sender = Recorder(), Recorder()
    got, _ = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, normalize=NORM, protocol=protocol,
                          progress=receiver),
        functools.partial(psikit.psi.send, small_sets.server, normalize=NORM, protocol=protocol,
                          progress=sender),
    )
    assert got == small_sets.truth()
    phases = {
        "vole": ["silent VOLE", "OKVS", "comparing summaries"],
        "rr16": ["base OTs", "OT extension", "comparing summaries"],
    }[protocol]
    assert receiver.stages() == ["waiting for the peer"] + phases
    assert sender.stages() == ["connecting"] + phases
    if protocol == "rr16":
        # The OT extension counts its chunks up to their total.
        chunks = [(done, total) for stage, done, total in receiver.reports if stage == "OT extension"]
        assert chunks[-1][0] == chunks[-1][1] and chunks[-1][1] >= 1, chunks


def test_a_circuit_psi_run_reports_its_stages(small_sets):
    receiver, sender = Recorder(), Recorder()
    got, _ = two_parties(
        functools.partial(psikit.cpsi.receive, "cardinality", small_sets.client, normalize=NORM,
                          progress=receiver),
        functools.partial(psikit.cpsi.send, "cardinality", small_sets.server, normalize=NORM,
                          progress=sender),
    )
    assert got.intersection_size == len({c.strip().lower() for c in small_sets.truth()})
    phases = ["hashing", "OPPRF", "comparing", "computing the result"]
    assert receiver.stages() == ["waiting for the peer"] + phases
    assert sender.stages() == ["connecting"] + phases


def test_builds_and_queries_report_their_stages(small_sets, tmp_path):
    build, update, he_query = Recorder(), Recorder(), Recorder()
    psikit.he.build_db(small_sets.server, tmp_path / "he", normalize=NORM, progress=build)
    assert build.stages() == ["reading", "choosing parameters", "OPRF", "filling bin bundles"]
    oprf = [(done, total) for stage, done, total in build.reports if stage == "OPRF"]
    assert oprf[-1] == (len(small_sets.server), len(small_sets.server)), oprf
    psikit.he.update_db(tmp_path / "he", add=["new@x.org"], remove=[small_sets.server[0]],
                        normalize=NORM, progress=update)
    assert update.stages() == ["reading", "removing", "reading", "OPRF", "filling bin bundles"]

    setup, filter_update, filter_query = Recorder(), Recorder(), Recorder()
    psikit.filter.setup(small_sets.server, tmp_path / "srv", normalize=NORM, progress=setup)
    assert setup.stages() == ["computing OPRF", "building the filter"]
    psikit.filter.update(tmp_path / "srv", add=["new@x.org"], remove=[small_sets.server[0]],
                         normalize=NORM, progress=filter_update)
    assert filter_update.stages() == ["computing OPRF (additions)", "computing OPRF (removals)"]
    with psikit.Server(filter_state=str(tmp_path / "srv"), he_state=str(tmp_path / "he")) as server:
        got = psikit.filter.query(server.addr, small_sets.client, normalize=NORM, progress=filter_query)
        assert filter_query.stages() == ["sync", "downloading the filter", "query"]
        # The download counts its bytes up to their total.
        download = [(done, total) for stage, done, total in filter_query.reports
                    if stage == "downloading the filter"]
        assert download[-1][0] == download[-1][1] > 0, download
        assert psikit.he.query(server.addr, small_sets.client, normalize=NORM, progress=he_query) == got
        assert he_query.stages() == ["parameters and keys", "query"]
        client, kept = psikit.filter.Client(server.addr), Recorder()
        assert client.query(small_sets.client, normalize=NORM, progress=kept) == got
        assert kept.stages() == ["sync", "downloading the filter", "query"]


class FakeTqdm:
    """Stands in for ``tqdm.auto.tqdm``: records the bars made."""

    bars: List["FakeTqdm"] = []

    def __init__(self, desc: str, total: Optional[int], leave: bool) -> None:
        self.desc, self.total, self.n, self.closed = desc, total, 0, False
        FakeTqdm.bars.append(self)

    def update(self, k: int) -> None:
        self.n += k

    def close(self) -> None:
        self.closed = True


def test_progress_true_draws_tqdm_bars(tmp_path, monkeypatch):
    fake = types.ModuleType("tqdm")
    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeTqdm  # type: ignore[attr-defined]
    fake.auto = auto  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tqdm", fake)
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    FakeTqdm.bars = []
    items = [f"x{i}" for i in range(1000)]
    psikit.he.build_db(items, tmp_path / "he", progress=True)
    bars = {b.desc: b for b in FakeTqdm.bars}
    assert list(bars) == ["reading", "choosing parameters", "OPRF", "filling bin bundles"]
    assert (bars["OPRF"].n, bars["OPRF"].total) == (1000, 1000)
    assert all(b.closed for b in FakeTqdm.bars), "a bar was left open"


def test_progress_true_without_tqdm_reports_nothing(tmp_path, monkeypatch, capfd):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` raises ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    done = psikit.filter.setup(["a", "b", "c"], tmp_path / "srv", progress=True)
    assert done["items"] == 3
    assert capfd.readouterr().err == ""


def test_an_ordinary_exception_in_the_callback_is_printed_and_the_job_goes_on(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))

    def broken(stage, done, total):
        raise ValueError("a bug in the callback")

    done = psikit.filter.setup(["a", "b"], tmp_path / "srv", progress=broken)
    assert done["items"] == 2
    assert seen and all(t is ValueError for t in seen), seen


@pytest.mark.parametrize("family", ["filter", "he"])
def test_keyboard_interrupt_in_the_callback_stops_the_build(family, tmp_path):
    def interrupt(stage, done, total):
        if stage in ("computing OPRF", "OPRF"):
            raise KeyboardInterrupt

    items = [f"x{i}" for i in range(2000)]
    build = psikit.filter.setup if family == "filter" else psikit.he.build_db
    with pytest.raises(KeyboardInterrupt):
        build(items, tmp_path / "state", progress=interrupt)
    assert state_files(tmp_path / "state") == {}


def test_a_cancelled_token_stops_a_build_and_an_update(tmp_path):
    psikit.he.build_db(["a", "b"], tmp_path / "he")
    before = state_files(tmp_path / "he")
    token = _native.Cancel()
    token.cancel()
    with token, pytest.raises(asyncio.CancelledError):
        psikit.he.build_db(["c"], tmp_path / "other")
    with token, pytest.raises(asyncio.CancelledError):
        psikit.he.update_db(tmp_path / "he", add=["c"])
    assert state_files(tmp_path / "other") == {}
    assert state_files(tmp_path / "he") == before


def test_async_progress_is_reported_on_the_loop_thread(small_sets):
    reports: List[Tuple[int, str]] = []

    def record(stage, done, total):
        reports.append((threading.get_ident(), stage))

    async def main():
        loop = asyncio.get_running_loop()
        addr: asyncio.Future = loop.create_future()
        receiver = asyncio.ensure_future(psikit.psi.receive_async(
            small_sets.client, normalize=NORM, listen="127.0.0.1:0", on_listening=addr.set_result,
            progress=record))
        await asyncio.wait([addr, receiver], timeout=60, return_when=asyncio.FIRST_COMPLETED)
        sent = psikit.psi.send_async(small_sets.server, normalize=NORM, connect=addr.result())
        got, _ = await asyncio.gather(receiver, sent)
        return got

    assert asyncio.run(main()) == small_sets.truth()
    assert {stage for _, stage in reports} >= {"waiting for the peer", "comparing summaries"}
    assert {thread for thread, _ in reports} == {threading.get_ident()}


# A set-up that runs for seconds (its OPRF alone: about 2.5 s in a release
# build, 10 s in a debug one), in a child process that reports how it ended.
CHILD = textwrap.dedent("""
    import json, sys, psikit
    state, force, with_callback = sys.argv[1], sys.argv[2] == "force", sys.argv[3] == "callback"
    n = 400_000
    items = [f"user{i}@example.org" for i in range(n)]
    seen = [0]
    def report(stage, done, total):
        if not seen[0]:
            print("started", flush=True)
        seen[0] = max(seen[0], done, 1)
    try:
        psikit.filter.setup(items, state, force=force, progress=report if with_callback else None)
        print(json.dumps({"ended": "finished", "done": seen[0], "n": n}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"ended": "KeyboardInterrupt", "done": seen[0], "n": n}), flush=True)
""")


def interrupted_setup(state, force: bool, with_callback: bool) -> dict:
    """Runs the child's set-up into ``state`` and sends it SIGINT half a
    second after the set-up began (its first report, or its lock file);
    returns the child's report."""
    import json
    import time

    mode = ["force" if force else "fresh", "callback" if with_callback else "none"]
    lock = os.path.join(state, ".psikit.lock")
    if os.path.exists(lock):
        os.remove(lock)  # no part of the state; nothing holds it now
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(state)] + mode,
                             stdout=subprocess.PIPE, text=True)
    try:
        if with_callback:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "started"
        else:
            # The set-up begins by taking the directory's lock (creating
            # its file, which an earlier command may have left).
            deadline = time.monotonic() + 60
            while not os.path.exists(lock):
                assert child.poll() is None, "the child ended before its set-up began"
                assert time.monotonic() < deadline, "the set-up never began"
                time.sleep(0.01)
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_ctrl_c_stops_a_setup_into_a_fresh_directory(tmp_path):
    ended = interrupted_setup(tmp_path / "srv", force=False, with_callback=True)
    assert ended["ended"] == "KeyboardInterrupt"
    assert ended["done"] < ended["n"], "the OPRF pass ran to its end before the set-up stopped"
    assert state_files(tmp_path / "srv") == {}


def test_ctrl_c_stops_a_forced_setup_and_keeps_the_old_state(tmp_path):
    psikit.filter.setup(["a", "b"], tmp_path / "srv")
    before = state_files(tmp_path / "srv")
    assert before
    # No callback: the set-up looks for the signal itself.
    ended = interrupted_setup(tmp_path / "srv", force=True, with_callback=False)
    assert ended["ended"] == "KeyboardInterrupt"
    assert state_files(tmp_path / "srv") == before
