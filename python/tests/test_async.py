"""asyncio entries: both parties of a run as tasks of one event loop, a
query next to them, and cancellation that closes the connection."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import psikit

NORM = ("trim", "lower")


async def listening(addr: asyncio.Future, task: asyncio.Future) -> str:
    """The address the party of ``task`` listens on; its error if it
    fails first."""
    await asyncio.wait([addr, task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    assert addr.done(), "the party never listened"
    return addr.result()


async def both(receive, send, lead, receiver_data, sender_data, **kw):
    """``receive(*lead, receiver_data)`` listening and ``send(*lead,
    sender_data)`` connecting, as two tasks."""
    loop = asyncio.get_running_loop()
    addr: asyncio.Future = loop.create_future()
    receiver = asyncio.ensure_future(
        receive(*lead, receiver_data, listen="127.0.0.1:0", on_listening=addr.set_result, **kw))
    sender = asyncio.ensure_future(send(*lead, sender_data, connect=await listening(addr, receiver), **kw))
    return await asyncio.gather(receiver, sender)


def test_two_parties_and_a_query_in_one_loop(small_sets, tmp_path):
    psikit.filter.setup(small_sets.server, tmp_path / "srv", normalize=NORM)

    async def main():
        with psikit.Server(filter_state=str(tmp_path / "srv")) as s:
            psi, cpsi, query = await asyncio.gather(
                both(psikit.psi.receive_async, psikit.psi.send_async, (), small_sets.client, small_sets.server,
                     normalize=NORM),
                both(psikit.cpsi.receive_async, psikit.cpsi.send_async, ("cardinality",), small_sets.client,
                     small_sets.server, normalize=NORM),
                psikit.filter.query_async(s.addr, small_sets.client, normalize=NORM),
            )
        return psi, cpsi, query

    (got, sent), (r, s), query = asyncio.run(main())
    assert (got, sent) == (small_sets.truth(), None)
    assert (r.intersection_size, s.learned) == (len({c.strip().lower() for c in small_sets.truth()}), False)
    assert query == small_sets.truth()


def test_cancelling_a_waiting_party_closes_its_port():
    async def main():
        loop = asyncio.get_running_loop()
        addr: asyncio.Future = loop.create_future()
        task = asyncio.ensure_future(psikit.cpsi.receive_async(
            "cardinality", ["a", "b"], listen="127.0.0.1:0", on_listening=addr.set_result))
        host, port = (await listening(addr, task)).rsplit(":", 1)
        t = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=10)
        assert done, "the cancelled call did not end"
        with pytest.raises(asyncio.CancelledError):
            task.result()
        return (host, int(port)), time.monotonic() - t

    (host, port), waited = asyncio.run(main())
    assert waited < 2, f"the cancelled call took {waited:.1f} s to end"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=5).close()


def test_errors_reach_the_awaiting_task():
    async def main():
        await psikit.cpsi.receive_async("threshold", ["a"], listen="127.0.0.1:0")

    with pytest.raises(psikit.InputError, match="needs threshold"):
        asyncio.run(main())
