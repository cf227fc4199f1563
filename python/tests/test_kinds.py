"""Lists, pandas DataFrames, pyarrow Tables and CSV paths give identical
results, with the CLI's key encoding."""

from __future__ import annotations

import pytest

import psikit
from conftest import write_csv

NORM = ("trim", "lower")


def _pandas():
    return pytest.importorskip("pandas")


def _pyarrow():
    return pytest.importorskip("pyarrow")


def rows_of(sets):
    return [(i, c, f"n{i}") for i, c in enumerate(sets.client)]


def test_encode_keys_agree_across_kinds(tmp_path, sets):
    rows = rows_of(sets)
    path = write_csv(tmp_path / "c.csv", ["id", "email", "name"], rows)
    want = psikit.encode_keys(path, key="email", normalize=NORM)
    assert psikit.encode_keys(sets.client, normalize=NORM) == want
    assert want.count(None) == 1
    pd = _pandas()
    df = pd.DataFrame(rows, columns=["id", "email", "name"])
    assert psikit.encode_keys(df, key="email", normalize=NORM) == want
    pa = _pyarrow()
    assert psikit.encode_keys(pa.Table.from_pandas(df), key="email", normalize=NORM) == want
    composite = psikit.encode_keys(path, key=["email", "id"], normalize=NORM)
    assert psikit.encode_keys(df, key=["email", "id"], normalize=NORM) == composite


def test_cells_become_what_a_csv_file_would_hold():
    pd = _pandas()
    cells = ["a", None, float("nan"), pd.NA, pd.NaT, 3, True, 1.5, b"x", bytearray(b"y"), memoryview(b"z"), "é"]
    got = psikit.encode_keys(pd.DataFrame({"k": pd.Series(cells, dtype=object)}), key="k", normalize=None)
    assert got == [b"a", None, None, None, None, b"3", b"True", b"1.5", b"x", b"y", b"z", "é".encode()]
    # A plain list holds the keys themselves: str or bytes only.
    with pytest.raises(psikit.InputError, match="a list item must be str or bytes, got int"):
        psikit.encode_keys(["a", 3])
    with pytest.raises(psikit.InputError, match="as many fields as the first"):
        psikit.encode_keys([("a", "b"), ("c",)])
    assert psikit.encode_keys([("a", b"b")], normalize=None) == psikit.encode_keys(
        pd.DataFrame({"x": ["a"], "y": ["b"]}), key=["x", "y"], normalize=None)


@pytest.fixture(scope="module")
def server(tmp_path_factory, sets):
    state = tmp_path_factory.mktemp("kinds") / "srv"
    psikit.filter.setup(sets.server, state, normalize=NORM)
    with psikit.Server(filter_state=str(state)) as s:
        yield s


def test_filter_query_kinds_identical(server, sets, tmp_path):
    rows = rows_of(sets)
    want = sets.truth()
    as_list = psikit.filter.query(server.addr, sets.client, normalize=NORM)
    assert as_list == want
    path = write_csv(tmp_path / "c.csv", ["id", "email", "name"], rows)
    as_csv = psikit.filter.query(server.addr, path, key="email", normalize=NORM)
    assert [d["email"] for d in as_csv] == want
    pd = _pandas()
    df = pd.DataFrame(rows, columns=["id", "email", "name"])
    as_df = psikit.filter.query(server.addr, df, key="email", normalize=NORM)
    assert isinstance(as_df, pd.DataFrame)
    assert list(as_df["email"]) == want
    assert list(as_df.columns) == ["id", "email", "name"]
    assert [str(i) for i in as_df["id"]] == [d["id"] for d in as_csv]
    pa = _pyarrow()
    table = pa.Table.from_pandas(df, preserve_index=False)
    as_arrow = psikit.filter.query(server.addr, table, key="email", normalize=NORM)
    assert isinstance(as_arrow, pa.Table)
    assert as_arrow.column("email").to_pylist() == want
    assert as_arrow.column_names == ["id", "email", "name"]


def test_arrow_c_stream_objects_are_read(server, sets):
    pa = _pyarrow()

    class Stream:
        """Anything exporting the Arrow C stream interface (polars, duckdb...)."""

        def __init__(self, table):
            self.table = table

        def __arrow_c_stream__(self, requested_schema=None):
            return self.table.__arrow_c_stream__(requested_schema)

    table = pa.table({"email": sets.client})
    got = psikit.filter.query(server.addr, Stream(table), key="email", normalize=NORM)
    assert got.column("email").to_pylist() == sets.truth()
