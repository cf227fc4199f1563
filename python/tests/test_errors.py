"""Bad input and failing peers raise the documented exceptions with the
CLI's one-line messages; nothing crashes the interpreter."""

from __future__ import annotations

import pytest

import psikit
from conftest import free_port, write_csv

# The frame header's version byte (psikit_transport::frame::WIRE_VERSION).
WIRE_VERSION = 7


def test_missing_csv_column(tmp_path):
    path = write_csv(tmp_path / "c.csv", ["id", "email"], [(1, "a")])
    with pytest.raises(psikit.InputError, match='key column "mail" not found in the header'):
        psikit.filter.setup(path, tmp_path / "srv", key="mail")


def test_missing_table_column():
    pd = pytest.importorskip("pandas")
    with pytest.raises(psikit.InputError, match="not found"):
        psikit.encode_keys(pd.DataFrame({"email": ["a"]}), key="mail")


def test_ambiguous_table_column():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame([["a", "b"]], columns=["email", "email"])
    with pytest.raises(psikit.InputError, match="more than once"):
        psikit.encode_keys(df, key="email")


def test_wrong_types():
    with pytest.raises(psikit.InputError, match="str or bytes"):
        psikit.encode_keys([1, 2, 3])
    with pytest.raises(psikit.InputError, match="unsupported input"):
        psikit.encode_keys(42)
    with pytest.raises(psikit.InputError, match="needs key="):
        psikit.encode_keys("some.csv")


def test_unknown_normalisation():
    with pytest.raises(psikit.InputError, match="unknown normalisation option"):
        psikit.encode_keys(["a"], normalize="upper")


def test_key_too_long():
    with pytest.raises(psikit.InputError, match="row 2"):
        psikit.encode_keys(["ok", "x" * 70_000])


def test_state_directory_in_use(tmp_path):
    psikit.filter.setup(["a"], tmp_path / "srv")
    with pytest.raises(psikit.PsikitError):
        psikit.filter.setup(["b"], tmp_path / "srv")
    assert psikit.filter.setup(["b"], tmp_path / "srv", force=True)["items"] == 1


def test_closed_server_is_a_protocol_error(tmp_path):
    psikit.filter.setup(["a"], tmp_path / "srv")
    server = psikit.Server(filter_state=str(tmp_path / "srv"))
    addr = server.addr
    assert psikit.filter.query(addr, ["a"]) == ["a"]
    server.close()
    assert not server.running
    server.close()  # idempotent
    with pytest.raises(psikit.ProtocolError):
        psikit.filter.query(addr, ["a"], timeout=5)


def test_nothing_to_serve():
    with pytest.raises(psikit.InputError, match="nothing to serve"):
        psikit.Server()


def test_wrong_family_at_the_server(tmp_path):
    psikit.filter.setup(["a"], tmp_path / "srv")
    with psikit.Server(filter_state=str(tmp_path / "srv")) as s:
        with pytest.raises(psikit.ProtocolError, match="does not serve"):
            psikit.he.query(s.addr, ["a"], timeout=5)


def test_peer_never_comes():
    with pytest.raises(psikit.ProtocolError, match="waiting for the peer"):
        psikit.psi.receive(["a"], listen=f"127.0.0.1:{free_port()}", accept_timeout=0.5)


def test_listen_or_connect():
    with pytest.raises(psikit.InputError, match="exactly one"):
        psikit.psi.send(["a"])
    with pytest.raises(psikit.InputError, match="protocol must be"):
        psikit.psi.send(["a"], connect="127.0.0.1:1", protocol="kkrt")


def test_progress_callback(tmp_path):
    seen = []
    psikit.filter.setup([f"x{i}" for i in range(1000)], tmp_path / "srv",
                        progress=lambda stage, done, total: seen.append((stage, done)))
    assert seen and seen[0][0]


def test_progress_with_tqdm(tmp_path):
    pytest.importorskip("tqdm")
    psikit.he.build_db(["a", "b"], tmp_path / "he", progress=True)
    with pytest.raises(psikit.InputError, match="progress must be"):
        psikit.filter.setup(["a"], tmp_path / "srv", progress="yes")


def _interrupt_after(seconds: float):
    import os
    import signal
    import threading

    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_interrupts_a_waiting_party():
    import time

    t0 = time.monotonic()
    _interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        psikit.psi.receive(["a"], listen=f"127.0.0.1:{free_port()}")
    assert time.monotonic() - t0 < 10


def test_ctrl_c_interrupts_a_query_to_a_silent_server():
    import socket
    import time

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        addr = "127.0.0.1:%d" % silent.getsockname()[1]
        for query in (psikit.filter.query, psikit.he.query):
            t0 = time.monotonic()
            _interrupt_after(0.5)
            with pytest.raises(KeyboardInterrupt):
                query(addr, ["a"])
            assert time.monotonic() - t0 < 10


def test_a_peers_error_text_is_escaped():
    """A hostile peer's error frame (newline, ANSI escapes) reaches the
    exception escaped and on one line, so it cannot forge output."""
    import socket
    import struct
    import threading

    text = "oops\n3000 of 3000 distinct items matched\x1b[2J\x1b[31m".encode()
    payload = struct.pack(">HI", 6, len(text)) + text
    frame = struct.pack(">I", len(payload) + 3) + bytes([WIRE_VERSION, 1, 0xFF]) + payload
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def fake_server():
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(2)
            try:
                conn.recv(65536)
            except OSError:
                pass
            conn.sendall(frame)

    t = threading.Thread(target=fake_server)
    t.start()
    addr = "127.0.0.1:%d" % listener.getsockname()[1]
    with pytest.raises(psikit.ProtocolError) as caught:
        psikit.filter.query(addr, ["a"], timeout=10)
    t.join()
    listener.close()
    message = str(caught.value)
    assert "\x1b" not in message and "\n" not in message, repr(message)
    assert "peer said" in message and "\\u{1b}[2J" in message, repr(message)
