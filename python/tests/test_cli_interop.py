"""A Python client against a `psikit serve` process, a CLI client against a
Python server, and two-party runs across the two front ends: they agree
because both use the same key encoding. Needs the CLI binary: set
PSIKIT_CLI to its path (scripts/test.sh does); skipped otherwise."""

from __future__ import annotations

import csv
import os
import re
import subprocess

import pytest

import psikit
from conftest import free_port, norm, write_csv

CLI = os.environ.get("PSIKIT_CLI")
pytestmark = pytest.mark.skipif(not CLI or not os.path.exists(CLI), reason="PSIKIT_CLI not set")
NORM = "trim,lower"


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300, **kw)
    assert out.returncode == 0, out.stderr
    return out


@pytest.fixture()
def files(tmp_path, small_sets):
    server = write_csv(tmp_path / "server.csv", ["email", "tier"],
                       [(s, f"t{i % 3}") for i, s in enumerate(small_sets.server)])
    client = write_csv(tmp_path / "client.csv", ["id", "email"], list(enumerate(small_sets.client)))
    return tmp_path, server, client


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_python_client_against_cli_server(files, small_sets):
    tmp, server_csv, client_csv = files
    cli("filter", "setup", "--input", server_csv, "--key", "email", "--normalize", NORM,
        "--state", str(tmp / "srv"))
    proc = subprocess.Popen([CLI, "serve", "--listen", "127.0.0.1:0", "--filter-state", str(tmp / "srv")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        addr = re.search(r"on (\S+:\d+)", line).group(1)
        got = psikit.filter.query(addr, small_sets.client, normalize=("trim", "lower"))
        assert got == small_sets.truth()
    finally:
        proc.kill()
        proc.wait()


def test_cli_client_against_python_server(files, small_sets):
    tmp, server_csv, client_csv = files
    psikit.he.build_db(server_csv, tmp / "he", key="email", label="tier", normalize=NORM)
    psikit.filter.setup(small_sets.server, tmp / "srv", normalize=NORM)
    with psikit.Server(filter_state=str(tmp / "srv"), he_state=str(tmp / "he")) as s:
        cli("filter", "query", "--server", s.addr, "--input", client_csv, "--key", "email",
            "--normalize", NORM, "--cache", str(tmp / "f.cache"), "--output", str(tmp / "m.csv"))
        assert [r["email"] for r in read_rows(tmp / "m.csv")] == small_sets.truth()
        cli("he", "query", "--server", s.addr, "--csv", client_csv, "--key", "email",
            "--normalize", NORM, "--out", str(tmp / "h.csv"))
        rows = read_rows(tmp / "h.csv")
        tiers = {norm(e): f"t{i % 3}" for i, e in enumerate(small_sets.server)}
        assert [(r["email"], r["tier"]) for r in rows] == [(c, tiers[norm(c)]) for c in small_sets.truth()]


@pytest.mark.parametrize("protocol", ["vole", "rr16"])
def test_two_party_across_front_ends(files, small_sets, protocol):
    tmp, server_csv, client_csv = files
    port = free_port()
    proc = subprocess.Popen([CLI, "psi", "send", "--listen", f"127.0.0.1:{port}", "--input", server_csv,
                             "--key", "email", "--normalize", NORM, "--protocol", protocol,
                             "--one-shot", "--accept-timeout-secs", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        proc.stderr.readline()  # "waiting for the peer on ..."
        got = psikit.psi.receive(small_sets.client, connect=f"127.0.0.1:{port}",
                                 normalize=("trim", "lower"), protocol=protocol)
        assert got == small_sets.truth()
        assert proc.wait(120) == 0
    finally:
        proc.kill()
        proc.wait()


def test_circuit_psi_across_front_ends(files, small_sets):
    """A CLI receiver (learning with --json) and a Python sender, both
    learning the sums: the same result on both sides, the plaintext one."""
    import json

    tmp, _, client_csv = files
    server_csv = write_csv(tmp / "values.csv", ["email", "v"],
                           [(s, i * 7) for i, s in enumerate(small_sets.server)])
    held = {norm(s): i * 7 for i, s in enumerate(small_sets.server)}
    inter = {norm(c) for c in small_sets.client if norm(c) in held}
    port = free_port()
    proc = subprocess.Popen([CLI, "cpsi", "sum", "receive", "--listen", f"127.0.0.1:{port}", "--input", client_csv,
                             "--key", "email", "--normalize", NORM, "--value-columns", "id", "--reveal-to", "both",
                             "--json", "--one-shot", "--accept-timeout-secs", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stderr.readline()  # "waiting for the peer on ..."
        got = psikit.cpsi.send("sum", server_csv, key="email", value_columns="v", normalize=("trim", "lower"),
                               reveal_to="both", connect=f"127.0.0.1:{port}")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        proc.kill()
        proc.wait()
    ids = sum(i for i, c in enumerate(small_sets.client) if norm(c) in held)
    assert (got.intersection_size, got.sender_sums, got.receiver_sums) == (len(inter), [sum(held[k] for k in inter)], [ids])
    cli_result = json.loads(out)
    assert (cli_result["intersection_size"], cli_result["sender_sums"], cli_result["receiver_sums"]) == (
        len(inter), got.sender_sums, got.receiver_sums)
