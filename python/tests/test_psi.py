"""Balanced two-party PSI (VOLE-PSI and RR16) end to end against the
plaintext truth, both parties in this process over loopback."""

from __future__ import annotations

import functools
import threading

import pytest

import psikit
from conftest import two_parties, write_csv

NORM = ("trim", "lower")

# (protocol, malicious, low_comm): VOLE-PSI's low-communication mode is
# semi-honest and its own.
MODES = [("vole", False, False), ("vole", True, False), ("vole", False, True), ("rr16", False, False),
         ("rr16", True, False)]


@pytest.mark.parametrize("protocol,malicious,low_comm", MODES)
def test_receiver_learns_the_intersection(protocol, malicious, low_comm, small_sets):
    kw = dict(protocol=protocol, malicious=malicious, low_comm=low_comm, normalize=NORM)
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
    with pytest.raises(psikit.ProtocolError, match="--low-comm"):
        two_parties(
            functools.partial(psikit.psi.receive, small_sets.client, normalize=NORM, low_comm=True),
            functools.partial(psikit.psi.send, small_sets.server, normalize=NORM),
        )
    with pytest.raises(psikit.PsikitError, match="semi-honest only"):
        psikit.psi.Party("receive", small_sets.client, low_comm=True, malicious=True)
    with pytest.raises(psikit.PsikitError, match="RR16 has none"):
        psikit.psi.Party("receive", small_sets.client, low_comm=True, protocol="rr16")


def exchange(a, b, max_rounds=10_000):
    """Carries the two parties' bytes to each other until both finish."""
    to_b, to_a = a.step(), b.step()
    rounds = 0
    while not (a.done and b.done):
        to_b, to_a = a.step(to_a), b.step(to_b)
        rounds += 1
        assert rounds < max_rounds, "the parties made no progress"


@pytest.mark.parametrize("protocol,malicious,low_comm", MODES)
def test_message_level_parties(protocol, malicious, low_comm, small_sets):
    kw = dict(protocol=protocol, malicious=malicious, low_comm=low_comm, normalize=NORM, reveal=True)
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


def test_a_csv_result_is_rows_made_when_read(small_sets, tmp_path):
    rows = [(c, f"n{i}") for i, c in enumerate(small_sets.client)]
    path = write_csv(tmp_path / "c.csv", ["email", "name"], rows)
    got, _ = two_parties(
        functools.partial(psikit.psi.receive, path, key="email", normalize=NORM),
        functools.partial(psikit.psi.send, small_sets.server, normalize=NORM),
    )
    held = {s.strip().lower() for s in small_sets.server}
    want_at = [i for i, (c, _) in enumerate(rows) if c.strip().lower() in held]
    want = [{"email": rows[i][0], "name": rows[i][1]} for i in want_at]
    assert isinstance(got, psikit.Rows) and len(want) > 2
    assert got == want and list(got) == want and got != want[1:]
    assert list(got.positions) == want_at
    assert (got[-1], got[1:3]) == (want[-1], want[1:3])
    with pytest.raises(IndexError):
        got[len(want)]
    assert f"{len(want)} rows" in repr(got)


def _glibc():
    """glibc through ctypes, with ``mallinfo2`` (skips elsewhere)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc only")
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("needs glibc 2.33 or later (mallinfo2)")

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _mapped_for(libc, size):
    """How much more memory glibc holds in mmapped blocks while a block of
    ``size`` bytes is allocated (0: it came from the heap)."""
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    assert block
    mapped = libc.mallinfo2().hblkhd - before
    libc.free(block)
    return mapped


def test_freed_memory_is_reused_during_a_run_only(small_sets):
    """While a run goes on, a big block comes from the heap (as in the
    CLI's one-shot commands); after it, from its own mmap again."""
    libc = _glibc()
    during = []

    def on_listening_alloc(addr, listening):
        # Below 64 MiB: a thread's own arena maps bigger blocks whatever
        # the setting.
        during.append(_mapped_for(libc, 16 << 20))
        listening(addr)

    def receiver(on_listening, **kw):
        return psikit.psi.receive(small_sets.client, normalize=NORM,
                                  on_listening=functools.partial(on_listening_alloc, listening=on_listening), **kw)

    got, _ = two_parties(receiver, functools.partial(psikit.psi.send, small_sets.server, normalize=NORM))
    assert got == small_sets.truth()
    assert during == [0]
    # Bigger than all free memory of the heap, so no free chunk serves it.
    size = libc.mallinfo2().fordblks + (16 << 20)
    assert _mapped_for(libc, size) >= size


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA and a server certificate it signed (for localhost and
    127.0.0.1), made with the openssl command (skips without it)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("tls")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=psikit test CA",
            "-days", "2")
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext")
    openssl("req", "-x509", *key, "-keyout", "other.key", "-out", "other.pem", "-subj", "/CN=other CA",
            "-days", "2")
    return d


def test_tls_between_python_parties(small_sets, certificates):
    d = certificates
    server_tls = {"cert": str(d / "server.pem"), "key": str(d / "server.key")}
    got, sent = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, normalize=NORM, tls=server_tls),
        functools.partial(psikit.psi.send, small_sets.server, normalize=NORM, tls={"ca": str(d / "ca.pem")}),
    )
    assert (got, sent) == (small_sets.truth(), None)
    # A client that trusts another CA refuses the server (which then waits
    # for another peer until its accept_timeout, or fails the handshake).
    listening, errors = threading.Event(), []
    addr = []

    def serve():
        try:
            psikit.psi.receive(small_sets.client, normalize=NORM, tls=server_tls, listen="127.0.0.1:0",
                               on_listening=lambda a: (addr.append(a), listening.set()), accept_timeout=5)
        except psikit.PsikitError as e:
            errors.append(e)
        listening.set()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert listening.wait(60) and addr
    with pytest.raises(psikit.ProtocolError):
        psikit.psi.send(small_sets.server, normalize=NORM, connect=addr[0], tls={"ca": str(d / "other.pem")})
    t.join(60)
    assert not t.is_alive() and len(errors) == 1


def test_a_bucketed_job_writes_the_matches_and_resumes_nothing_twice(tmp_path):
    server = [f"user{i}@example.org" for i in range(0, 3000, 2)]
    client = [f"User{i}@Example.org " for i in range(0, 3000, 3)]
    s_csv = write_csv(tmp_path / "s.csv", ["email"], [(s,) for s in server])
    c_csv = write_csv(tmp_path / "c.csv", ["email"], [(c,) for c in client])
    stages = []

    def progress(stage, done, total):
        stages.append(stage)

    def job(side, **kw):
        return dict(key="email", normalize=NORM, job_dir=str(tmp_path / side), bucket_items=300, lanes=2, **kw)

    (count, out), sent = two_parties(
        functools.partial(psikit.psi.receive, c_csv, output=str(tmp_path / "out.csv"), details=True,
                          progress=progress, **job("r")),
        functools.partial(psikit.psi.send, s_csv, **job("s")),
    )
    held = set(server)
    want = [c for c in client if c.strip().lower() in held]
    assert count == len(want) == 500
    assert sent is None
    assert out["buckets"] > 1 and out["buckets_run"] == out["buckets"]
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert rows[0] == "email" and [r.strip('"') for r in rows[1:]] == want
    assert "buckets" in stages and "reading the input" in stages
    # The same job again: refused without resume=True, and with it every
    # bucket is already committed on both sides.
    with pytest.raises(psikit.InputError, match="--resume"):
        psikit.psi.send(s_csv, connect="127.0.0.1:9", **job("s"))
    with pytest.raises(psikit.InputError, match="lanes must be 1 to 16"):
        psikit.psi.send(s_csv, connect="127.0.0.1:9", **dict(job("s2"), lanes=0))
    (count, out), _ = two_parties(
        functools.partial(psikit.psi.receive, c_csv, output=str(tmp_path / "out2.csv"), details=True,
                          resume=True, **job("r")),
        functools.partial(psikit.psi.send, s_csv, resume=True, **job("s")),
    )
    assert count == 500 and out["buckets_run"] == 0


def test_a_job_without_output_returns_the_rows_as_one_shot(tmp_path, small_sets):
    """Without ``output=`` a job hands the matched rows back in the kind of
    the data, as a one-shot run does (a list, a CSV path's dicts)."""
    one_shot, _ = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, normalize=NORM),
        functools.partial(psikit.psi.send, small_sets.server, normalize=NORM),
    )
    job = dict(normalize=NORM, bucket_items=40)
    (got, out), sent = two_parties(
        functools.partial(psikit.psi.receive, small_sets.client, job_dir=str(tmp_path / "r"), details=True, **job),
        functools.partial(psikit.psi.send, small_sets.server, job_dir=str(tmp_path / "s"), **job),
    )
    assert got == one_shot == small_sets.truth()
    assert sent is None and out["buckets"] > 1
    path = write_csv(tmp_path / "c.csv", ["email"], [(c,) for c in small_sets.client])
    rows, _ = two_parties(
        functools.partial(psikit.psi.receive, path, key="email", job_dir=str(tmp_path / "r2"), **job),
        functools.partial(psikit.psi.send, small_sets.server, job_dir=str(tmp_path / "s2"), **job),
    )
    assert [r["email"] for r in rows] == small_sets.truth()


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_parquet_inputs_read_as_their_csv(tmp_path, compression):
    """A Parquet path is read as the CSV of the same rows: one-shot and as
    a job, whose output rows come out as CSV."""
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    server = [f"user{i}@example.org" for i in range(0, 3000, 2)]
    client = [f"User{i}@Example.org " for i in range(0, 3000, 3)]
    s_pq = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"email": server, "n": list(range(len(server)))}), s_pq,
                   compression=compression, row_group_size=400)
    c_csv = write_csv(tmp_path / "c.csv", ["email"], [(c,) for c in client])
    held = set(server)
    want = [c for c in client if c.strip().lower() in held]
    matches, _ = two_parties(
        functools.partial(psikit.psi.receive, c_csv, key="email", normalize=NORM),
        functools.partial(psikit.psi.send, s_pq, key="email", normalize=NORM),
    )
    assert len(matches) == len(want) == 500
    # The Parquet side receives as a job: its matched rows, as CSV.
    c_pq = str(tmp_path / "c.parquet")
    pq.write_table(pa.table({"email": client}), c_pq, compression=compression)
    s_csv = write_csv(tmp_path / "s.csv", ["email"], [(s,) for s in server])
    job = dict(key="email", normalize=NORM, bucket_items=300)
    count, _ = two_parties(
        functools.partial(psikit.psi.receive, c_pq, output=str(tmp_path / "out.csv"),
                          job_dir=str(tmp_path / "r"), **job),
        functools.partial(psikit.psi.send, s_csv, job_dir=str(tmp_path / "s"), **job),
    )
    assert count == 500
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert rows[0] == "email" and [r.strip('"') for r in rows[1:]] == want


def test_job_options_need_a_job_dir(small_sets):
    with pytest.raises(psikit.InputError, match="job_dir"):
        psikit.psi.send(small_sets.server, connect="127.0.0.1:9", resume=True)
