"""Circuit PSI (psikit.cpsi) end to end against the plaintext truth, both
parties in this process over loopback: every application, who learns, and
the errors of bad input."""

from __future__ import annotations

import functools
import random

import pytest

import psikit
from conftest import norm, two_parties, write_csv

NORM = ("trim", "lower")
MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def data(small_sets, tmp_path_factory):
    """The small sets as CSV files with value columns: the sender's ``v``
    (near 2^64, so sums wrap) and the receiver's ``n`` (the duplicated row
    of the receiver adds up)."""
    rng = random.Random(5)
    tmp = tmp_path_factory.mktemp("cpsi")
    sv = {s: rng.getrandbits(64) for s in small_sets.server}
    rv = [rng.randrange(1000) for _ in small_sets.client]
    server = write_csv(tmp / "server.csv", ["email", "v"], [(s, sv[s]) for s in small_sets.server])
    client = write_csv(tmp / "client.csv", ["email", "n"], list(zip(small_sets.client, rv)))
    held = {norm(s): sv[s] for s in small_sets.server}
    inter = {norm(c) for c in small_sets.client if norm(c) in held}
    per_key = {}  # the receiver's value per key: its rows' values added up
    for c, n in zip(small_sets.client, rv):
        per_key[norm(c)] = per_key.get(norm(c), 0) + n
    truth = {
        "inner_product": sum(held[k] * per_key[k] for k in inter) & MASK,
        "receiver_values": per_key,
        "size": len(inter),
        "sender_sum": sum(held[k] for k in inter) & MASK,
        "receiver_sum": sum(n for c, n in zip(small_sets.client, rv) if norm(c) in held),
        "held": held,
    }
    return server, client, truth


def run(app, receiver_data, sender_data, **kw):
    """Both parties of ``app``; options per party as ``r_...``/``s_...``."""
    rkw = {k[2:]: v for k, v in kw.items() if k.startswith("r_")}
    skw = {k[2:]: v for k, v in kw.items() if k.startswith("s_")}
    common = {k: v for k, v in kw.items() if not k.startswith(("r_", "s_"))}
    return two_parties(
        functools.partial(psikit.cpsi.receive, app, receiver_data, normalize=NORM, **common, **rkw),
        functools.partial(psikit.cpsi.send, app, sender_data, normalize=NORM, **common, **skw),
    )


def test_cardinality(small_sets, data):
    r, s = run("cardinality", small_sets.client, small_sets.server)
    assert (r.learned, r.intersection_size) == (True, data[2]["size"])
    assert (s.learned, s.intersection_size) == (False, None)
    assert r.bytes_sent == s.bytes_received > 0


@pytest.mark.parametrize("reveal_to", ["receiver", "sender", "both"])
def test_sum_of_both_parties_values(data, reveal_to):
    server, client, truth = data
    r, s = run("sum", client, server, key="email", reveal_to=reveal_to, r_value_columns="n", s_value_columns=["v"])
    want = (truth["size"], [truth["sender_sum"]], [truth["receiver_sum"]])
    for res, learns in ((r, reveal_to != "sender"), (s, reveal_to != "receiver")):
        assert res.learned == learns
        got = (res.intersection_size, res.sender_sums, res.receiver_sums)
        assert got == (want if learns else (None, None, None))


def test_sum_with_a_minimum_intersection(data):
    server, client, truth = data
    size = truth["size"]
    r, s = run("sum", client, server, key="email", min_intersection=size + 1, s_value_columns="v")
    assert (r.withheld, r.intersection_size, r.sender_sums) == (True, None, None)
    assert s.withheld is True
    r, s = run("sum", client, server, key="email", min_intersection=size, s_value_columns="v")
    assert (r.withheld, r.intersection_size, r.sender_sums, r.receiver_sums) == (
        False, size, [truth["sender_sum"]], [])
    assert (s.withheld, s.learned) == (False, False)


def test_a_job_opens_the_whole_sum_once(data, tmp_path):
    """The sum (with the inner product) and the threshold as bucketed jobs,
    from CSV files and from lists, equal the one-shot results."""
    server, client, truth = data
    stages = []

    def job(side, **kw):
        return dict(job_dir=str(tmp_path / side), bucket_items=300, lanes=2, **kw)

    r, s = run("sum", client, server, key="email", inner_product=True, r_value_columns="n",
               s_value_columns="v", r_progress=lambda stage, done, total: stages.append(stage),
               **{f"{p}_{k}": v for p in "rs" for k, v in job(p).items()})
    assert (r.intersection_size, r.sender_sums, r.receiver_sums, r.inner_product) == (
        truth["size"], [truth["sender_sum"]], [truth["receiver_sum"]], truth["inner_product"])
    assert (s.learned, s.intersection_size) == (False, None)
    assert "buckets" in stages
    for t, reached in ((truth["size"], True), (truth["size"] + 1, False)):
        r, _ = run("threshold", client, server, key="email", threshold=t,
                   **{f"{p}_{k}": v for p in "rs" for k, v in job(f"{p}{t}").items()})
        assert r.threshold_reached is reached
    # The union's learner as a job writes the union to a file: it must name one.
    with pytest.raises(psikit.InputError, match="name an output"):
        psikit.cpsi.send("union", server, key="email", reveal_to="sender", connect="127.0.0.1:9",
                         **job("u"))


def test_a_shares_job_writes_each_bucket_s_shares(data, tmp_path):
    """The shares as a job: both parties' files, bin by bin, XOR to the
    membership of the receive party's keys, the value shares add up."""
    server, client, truth = data
    out = {p: tmp_path / f"{p}-shares.csv" for p in "rs"}
    kw = {f"{p}_{k}": v for p in "rs" for k, v in
          dict(job_dir=str(tmp_path / p), bucket_items=300, lanes=2, output=str(out[p])).items()}
    r, s = run("shares", client, server, key="email", s_value_columns="v", **kw)
    assert (r.application, r.shares, s.shares) == ("shares", None, None)
    rows = {p: [line.split(",") for line in out[p].read_text().splitlines()] for p in "rs"}
    assert rows["r"][0] == ["bucket", "bin", "share", "value_share_1", "row"]
    assert rows["s"][0] == ["bucket", "bin", "share", "value_share_1"]
    members = [(a, b) for a, b in zip(rows["r"][1:], rows["s"][1:]) if a[2] != b[2]]
    assert len(members) == truth["size"] > 0
    assert all(a[4] for a, _ in members), "a member bin holds a receiver row"
    total = sum(int(a[3]) + int(b[3]) for a, b in members) % (1 << 64)
    assert total == truth["sender_sum"]


def test_a_union_job_writes_the_union(data, small_sets, tmp_path):
    """The union as a job: the learner's file holds every key of both
    parties once; the provider learns nothing."""
    server, client, _ = data
    out = tmp_path / "union.csv"
    kw = {f"{p}_{k}": v for p in "rs" for k, v in
          dict(job_dir=str(tmp_path / p), bucket_items=300, lanes=2).items()}
    r, s = run("union", client, server, key="email", reveal_to="sender", s_output=str(out), **kw)
    assert (s.application, s.learned, s.union) == ("union", True, None)
    assert r.learned is False
    keys = out.read_text().splitlines()
    assert keys[0] == "key"
    # Rows whose key is empty once normalised hold no item.
    want = ({norm(k) for k in small_sets.client} | {norm(k) for k in small_sets.server}) - {""}
    assert sorted(keys[1:]) == sorted(want)


def test_sum_from_dataframes_equals_csv(small_sets, data):
    pd = pytest.importorskip("pandas")
    server, client, truth = data
    sdf = pd.read_csv(server, dtype={"v": "uint64"})
    rdf = pd.read_csv(client)
    r, _ = run("sum", rdf, sdf, key="email", r_value_columns="n", s_value_columns="v", ot="iknp", epc="off")
    assert (r.intersection_size, r.sender_sums, r.receiver_sums) == (
        truth["size"], [truth["sender_sum"]], [truth["receiver_sum"]])


def test_inner_product_over_the_intersection(data):
    server, client, truth = data
    r, s = run("sum", client, server, key="email", inner_product=True, r_value_columns="n", s_value_columns="v")
    assert (r.intersection_size, r.receiver_sums) == (truth["size"], [truth["receiver_sum"]])
    assert r.inner_product == truth["inner_product"] != 0
    assert (s.learned, s.inner_product) == (False, None)
    r, _ = run("sum", client, server, key="email", r_value_columns="n", s_value_columns="v")
    assert r.inner_product is None  # not asked for


def test_inner_product_refuses_a_receiver_value_too_wide(data):
    server, client, truth = data
    bits = max(truth["receiver_values"].values()).bit_length() - 1  # the widest is >= 2^bits
    # Refused before any peer: without the check this would wait for one
    # and time out with a ProtocolError.
    too_wide = rf"row \d+: the inner product takes values below 2\^{bits}; \d+ is not"
    with pytest.raises(psikit.InputError, match=too_wide):
        psikit.cpsi.receive("sum", client, key="email", value_columns="n", inner_product=True,
                            product_bits=bits, listen="127.0.0.1:0", accept_timeout=5)
    # One bit more fits: a run with a peer goes through.
    r, _ = run("sum", client, server, key="email", inner_product=True, product_bits=bits + 1,
               r_value_columns="n", s_value_columns="v", ot="iknp", epc="off")
    assert r.inner_product == truth["inner_product"]


@pytest.mark.parametrize("offset,reached", [(0, True), (1, False)])
def test_threshold(small_sets, data, offset, reached):
    t = data[2]["size"] + offset
    r, s = run("threshold", small_sets.client, small_sets.server, threshold=t)
    assert (r.threshold_reached, s.threshold_reached) == (reached, None)


@pytest.mark.parametrize("reveal_to", ["receiver", "sender"])
def test_union_for_its_learner(small_sets, reveal_to):
    r, s = run("union", small_sets.client, small_sets.server, reveal_to=reveal_to)
    learner, other, own, peer = (r, s, small_sets.client, small_sets.server)
    if reveal_to == "sender":
        learner, other, own, peer = (s, r, small_sets.server, small_sets.client)
    assert (other.learned, other.union) == (False, None)
    kept = [x for x in own if norm(x)]  # rows with a key
    assert learner.union[:len(kept)] == kept
    extra = learner.union[len(kept):]
    assert sorted(extra) == sorted({norm(x) for x in peer if norm(x)} - {norm(x) for x in own})


def test_union_as_a_table(small_sets):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"email": small_sets.client, "n": range(len(small_sets.client))})
    r, _ = run("union", df, small_sets.server, r_key="email")
    kept = df[df["email"].map(norm) != ""]
    assert list(r.union["email"][:len(kept)]) == list(kept["email"])
    extra = r.union.iloc[len(kept):]
    assert extra["n"].isna().all()
    assert set(extra["email"]) == {norm(s) for s in small_sets.server} - {norm(c) for c in small_sets.client}


def test_shares_recombine_to_membership(data):
    server, client, truth = data
    r, s = run("shares", client, server, key="email", s_value_columns="v")
    assert r.learned and s.learned
    assert len(r.shares) == len(s.shares) > 0
    held = truth["held"]
    members = 0
    for rb, sb in zip(r.shares, s.shares):
        assert rb["bin"] == sb["bin"]
        member = rb["share"] ^ sb["share"]
        assert member == (rb["key"] is not None and rb["key"] in held)
        if member:
            members += 1
            assert (rb["value_share_1"] + sb["value_share_1"]) & MASK == held[rb["key"]]
    assert members == truth["size"]
    assert "key" not in s.shares[0]


def test_shares_as_a_dataframe(small_sets):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"email": small_sets.client})
    r, s = run("shares", df, small_sets.server, r_key="email")
    assert isinstance(r.shares, pd.DataFrame)
    rows = r.shares.dropna(subset=["key"])
    # Each key's row is the first input row holding it.
    assert all(norm(df["email"].iloc[int(i)]) == k for i, k in zip(rows["row"], rows["key"]))
    member = r.shares["share"] ^ pd.Series([b["share"] for b in s.shares])
    assert int(member.sum()) == len({norm(c) for c in small_sets.truth()})


def test_bad_input_raises_before_any_connection(small_sets, data, tmp_path):
    server, client, _ = data
    with pytest.raises(psikit.InputError, match="value column"):
        psikit.cpsi.receive("sum", client, key="email", value_columns="missing", listen="127.0.0.1:0")
    pd = pytest.importorskip("pandas")
    with pytest.raises(psikit.InputError, match="value column 'missing' not found"):
        psikit.cpsi.receive("sum", pd.read_csv(client), key="email", value_columns="missing",
                            listen="127.0.0.1:0")


@pytest.mark.parametrize("app,kw,match", [
    ("threshold", {}, "needs threshold"),
    ("cardinality", {"threshold": 3}, "belongs to the threshold"),
    ("cardinality", {"value_columns": "v"}, "value_columns"),
    ("cardinality", {"min_intersection": 5}, "min_intersection belongs to the sum"),
    ("union", {"reveal_to": "both"}, "learned by one party"),
    ("cardinality", {"inner_product": True}, "inner_product belongs to the sum"),
    ("sum", {"inner_product": True}, "needs a value column"),
    ("sum", {"inner_product": True, "value_columns": "n", "product_bits": 65}, "product_bits must be 1 to 64"),
    ("sum", {"inner_product": True, "value_columns": "n", "product_bits": 0}, "product_bits must be 1 to 64"),
    ("product", {}, "application must be"),
    ("sum", {"epc": 12}, "epc must be"),
    ("sum", {"ot": "fast"}, "ot must be"),
])
def test_bad_options_raise(data, app, kw, match):
    with pytest.raises(psikit.InputError, match=match):
        psikit.cpsi.receive(app, data[1], key="email", listen="127.0.0.1:0", **kw)


def test_bad_values_raise(tmp_path):
    path = write_csv(tmp_path / "bad.csv", ["email", "v"], [("a", "1"), ("b", "-2")])
    with pytest.raises(psikit.InputError, match=r"row 2: value \"-2\" in column v is not an unsigned integer"):
        psikit.cpsi.send("sum", path, key="email", value_columns="v", listen="127.0.0.1:0")
    with pytest.raises(psikit.InputError, match="a list holds the keys only"):
        psikit.cpsi.send("sum", ["a"], value_columns="v", listen="127.0.0.1:0")


def test_other_settings_are_refused(small_sets):
    with pytest.raises(psikit.ProtocolError):
        run("threshold", small_sets.client, small_sets.server, r_threshold=5, s_threshold=6)


def test_union_and_shares_as_arrow_tables(small_sets):
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"email": small_sets.client, "n": list(range(len(small_sets.client)))})
    r, _ = run("union", table, small_sets.server, r_key="email")
    kept = [c for c in small_sets.client if norm(c)]
    assert r.union.column("email").to_pylist()[:len(kept)] == kept
    assert r.union.column("n").to_pylist()[len(kept):] == [None] * (r.union.num_rows - len(kept))
    r, _ = run("shares", table, small_sets.server, r_key="email")
    assert r.shares.column_names == ["bin", "share", "key", "row"]


def exchange(a, b, max_rounds=10_000):
    """Carries two message-level parties' bytes to each other with
    ``step`` until both finish, in 1000-byte pieces (any split must do)."""

    def step(party, incoming):
        pieces = [incoming[i:i + 1000] for i in range(0, len(incoming), 1000)] or [b""]
        return b"".join(party.step(piece) for piece in pieces)

    for_a, for_b = b"", b""
    rounds = 0
    while not (a.done and b.done):
        from_a, from_b = step(a, for_a), step(b, for_b)
        for_a, for_b = from_b, from_a
        rounds += 1
        assert rounds < max_rounds, "the parties made no progress"


def test_message_level_cardinality(small_sets, data):
    r = psikit.cpsi.Party("receive", "cardinality", small_sets.client, normalize=NORM)
    s = psikit.cpsi.Party("send", "cardinality", small_sets.server, normalize=NORM)
    exchange(r, s)
    assert (r.result().learned, r.result().intersection_size) == (True, data[2]["size"])
    assert (s.result().learned, s.result().intersection_size) == (False, None)
    assert r.result().bytes_received == s.result().bytes_sent > 0


def test_message_level_sum_as_the_one_shot_calls(data):
    server, client, truth = data
    r = psikit.cpsi.Party("receive", "sum", client, key="email", normalize=NORM, value_columns="n",
                          reveal_to="both")
    s = psikit.cpsi.Party("send", "sum", server, key="email", normalize=NORM, value_columns=["v"],
                          reveal_to="both")
    to_s, to_r = r.step(), s.step()  # the step() shorthand
    while not (r.done and s.done):
        to_s, to_r = r.step(to_r), s.step(to_s)
    want = (truth["size"], [truth["sender_sum"]], [truth["receiver_sum"]])
    for res in (r.result(), s.result()):
        assert (res.application, res.learned) == ("sum", True)
        assert (res.intersection_size, res.sender_sums, res.receiver_sums) == want


def test_message_level_options_are_checked_as_the_one_shot_calls(small_sets):
    with pytest.raises(psikit.InputError, match="threshold belongs to the threshold application"):
        psikit.cpsi.Party("receive", "cardinality", small_sets.client, threshold=3)
    with pytest.raises(psikit.InputError, match="min_intersection belongs to the sum application"):
        psikit.cpsi.Party("send", "cardinality", small_sets.server, min_intersection=3)
    with pytest.raises(psikit.InputError, match="role must be"):
        psikit.cpsi.Party("both", "cardinality", small_sets.server)


def test_message_level_malformed_bytes_raise():
    party = psikit.cpsi.Party("receive", "cardinality", ["a", "b"])
    assert party.step() and not party.done  # its first message
    with pytest.raises(psikit.InputError, match="not finished"):
        party.result()
    party.step(b"\x00\x00\x00\x05garbage-that-is-no-frame")
    assert party.done
    for _ in range(2):  # the error is kept
        with pytest.raises(psikit.ProtocolError):
            party.result()
    assert party.step(b"more") == b""  # finished: nothing more runs
    closed = psikit.cpsi.Party("send", "cardinality", ["a"])
    closed.step()
    closed.step(peer_closed=True)
    assert closed.done
    with pytest.raises(psikit.ProtocolError):
        closed.result()


def test_message_level_first_api_still_works_and_warns(small_sets, data):
    """push/advance/take_outgoing, deprecated for step, give the same run."""
    r = psikit.cpsi.Party("receive", "cardinality", small_sets.client, normalize=NORM)
    s = psikit.cpsi.Party("send", "cardinality", small_sets.server, normalize=NORM)
    with pytest.warns(DeprecationWarning, match="use step"):
        r.advance(), s.advance()
        while not (r.done and s.done):
            to_s, to_r = r.take_outgoing(), s.take_outgoing()
            r.push(to_r), s.push(to_s)
            r.advance(), s.advance()
    assert r.result().intersection_size == data[2]["size"]
