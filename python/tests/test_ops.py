"""`psikit serve`'s admin listener read as Prometheus reads it: the
exposition parsed with the `prometheus_client` parser, its counters
checked against a scripted sequence of queries, a refusal and a reload.
Needs the CLI binary (PSIKIT_CLI) and prometheus_client."""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import psikit
from conftest import norm

CLI = os.environ.get("PSIKIT_CLI")
pytestmark = pytest.mark.skipif(not CLI or not os.path.exists(CLI), reason="PSIKIT_CLI not set")
parser = pytest.importorskip("prometheus_client.openmetrics.parser")
NORM = ("trim", "lower")


def samples(admin: str) -> dict:
    """Every sample of /metrics, by name and sorted labels."""
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        text = r.read().decode()
    got = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            got[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return got


def ready(admin: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{admin}/readyz", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def wait_ready(admin: str, want: int) -> None:
    deadline = time.monotonic() + 30
    while ready(admin) != want:
        assert time.monotonic() < deadline, f"/readyz never became {want}"
        time.sleep(0.2)


def test_metrics_follow_queries_refusals_and_reloads(tmp_path, small_sets):
    psikit.filter.setup(small_sets.server, tmp_path / "srv", normalize="trim,lower")
    items = len({norm(c) for c in small_sets.client})
    budget = 2 * items
    proc = subprocess.Popen([CLI, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                             "--reload-secs", "1", "--query-budget", str(budget),
                             "--filter-state", str(tmp_path / "srv")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = re.search(r"on (\S+:\d+)", proc.stdout.readline()).group(1)
        admin = re.search(r"http://(\S+)", proc.stdout.readline()).group(1)
        wait_ready(admin, 200)
        items_total = ("psikit_request_items_total", (("protocol", "filter"),))
        assert psikit.filter.query(addr, small_sets.client, normalize=NORM) == small_sets.truth()
        per_query = samples(admin)[items_total]
        assert 0 < per_query <= items
        assert psikit.filter.query(addr, small_sets.client, normalize=NORM) == small_sets.truth()
        with pytest.raises(psikit.PsikitError):
            psikit.filter.query(addr, small_sets.client, normalize=NORM)
        m = samples(admin)
        oprf = lambda outcome: m[("psikit_requests_total",
                                  (("outcome", outcome), ("protocol", "filter"), ("step", "oprf")))]
        assert oprf("ok") == 2
        assert oprf("budget") == 1
        assert m[("psikit_refused_total", (("reason", "budget"),))] == 1
        assert m[items_total] == 3 * per_query
        assert m[("psikit_connections_total", ())] == 3
        assert m[("psikit_ready", (("protocol", "filter"),))] == 1

        state = tmp_path / "srv" / "filter.state"
        whole = state.read_bytes()
        state.write_bytes(b"damaged")
        wait_ready(admin, 503)
        m = samples(admin)
        assert m[("psikit_ready", (("protocol", "filter"),))] == 0
        assert m[("psikit_state_reloads_total", (("outcome", "failed"), ("protocol", "filter")))] == 1
        state.write_bytes(whole)
        wait_ready(admin, 200)
    finally:
        proc.kill()
        proc.wait()
