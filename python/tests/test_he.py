"""The HE family (labeled PSI) end to end against the plaintext truth."""

from __future__ import annotations

import time

import pytest

import psikit
from conftest import norm, write_csv

NORM = ("trim", "lower")


def tier(i: int) -> str:
    return ["gold", "silver", "bronze, with a comma"][i % 3]


@pytest.fixture(scope="module")
def db(tmp_path_factory, small_sets):
    state = tmp_path_factory.mktemp("he") / "srv"
    labels = {s: (f"Name {i}", tier(i)) for i, s in enumerate(small_sets.server)}
    report = psikit.he.build_db(labels, state, normalize=NORM, client_items=256)
    assert report["items"] == len(small_sets.server)
    with psikit.Server(he_state=str(state), reload_secs=0.1) as server:
        yield state, server, {norm(k): v for k, v in labels.items()}


def test_query_list_returns_labels(db, small_sets):
    _, server, labels = db
    got = psikit.he.query(server.addr, small_sets.client, normalize=NORM)
    want = {c: labels[norm(c)] for c in small_sets.truth()}
    assert got == want
    assert len(got) > 50


def test_query_tables_get_label_columns(db, small_sets, tmp_path):
    _, server, labels = db
    rows = [(i, c) for i, c in enumerate(small_sets.client)]
    truth = small_sets.truth()
    path = write_csv(tmp_path / "c.csv", ["id", "email"], rows)
    as_csv = psikit.he.query(server.addr, path, key="email", normalize=NORM, label_names=["name", "tier"])
    assert [d["email"] for d in as_csv] == truth
    assert [(d["name"], d["tier"]) for d in as_csv] == [labels[norm(c)] for c in truth]
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(rows, columns=["id", "email"])
    as_df = psikit.he.query(server.addr, df, key="email", normalize=NORM)
    assert list(as_df.columns) == ["id", "email", "label_1", "label_2"]
    assert list(as_df["email"]) == truth
    assert list(zip(as_df["label_1"], as_df["label_2"])) == [labels[norm(c)] for c in truth]
    pa = pytest.importorskip("pyarrow")
    as_arrow = psikit.he.query(server.addr, pa.Table.from_pandas(df, preserve_index=False), key="email",
                               normalize=NORM)
    assert as_arrow.column("email").to_pylist() == truth
    assert as_arrow.column("label_2").to_pylist() == list(as_df["label_2"])


def test_build_from_a_dataframe_and_update(tmp_path, small_sets):
    pd = pytest.importorskip("pandas")
    server = pd.DataFrame({"email": small_sets.server, "tier": [tier(i) for i in range(len(small_sets.server))]})
    state = tmp_path / "srv"
    psikit.he.build_db(server, state, key="email", label="tier", normalize=NORM)
    with psikit.Server(he_state=str(state), reload_secs=0.1) as s:
        got = psikit.he.query(s.addr, small_sets.client, normalize=NORM)
        assert sorted(got) == sorted(small_sets.truth())
        # The server publishes its label column's name: the client's table
        # gets it as a header.
        client = pd.DataFrame({"id": range(len(small_sets.client)), "email": small_sets.client})
        table = psikit.he.query(s.addr, client, key="email", normalize=NORM)
        assert list(table.columns) == ["id", "email", "tier"]
        assert all(isinstance(v, str) for v in got.values())
        gone = small_sets.server[:40]
        report = psikit.he.update_db(state, add={"new@example.org": "platinum"}, remove=gone, normalize=NORM)
        assert report["removed"] == 40 and report["added"] == 1
        held = {norm(x) for x in small_sets.server[40:]}
        want = {c: None for c in small_sets.client if norm(c) in held}
        deadline = time.monotonic() + 30
        while True:
            got = psikit.he.query(s.addr, small_sets.client + ["NEW@example.org"], normalize=NORM)
            if "NEW@example.org" in got and set(got) == set(want) | {"NEW@example.org"}:
                break
            assert time.monotonic() < deadline, "the update was not served"
            time.sleep(0.2)
        assert got["NEW@example.org"] == "platinum"


def test_unlabeled_database_returns_items(tmp_path):
    psikit.he.build_db(["a", "b", "c"], tmp_path / "srv")
    with psikit.Server(he_state=str(tmp_path / "srv")) as s:
        assert psikit.he.query(s.addr, ["c", "d", "a"]) == ["c", "a"]
