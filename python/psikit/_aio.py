"""asyncio entries: a blocking call run in the loop's default executor.

The native calls release the GIL while they wait on the network, so the
event loop (and other calls) run meanwhile. Cancelling the awaiting task
sets a native cancellation token, which the call sees within 100 ms: its
connection is closed and the task ends with ``asyncio.CancelledError``
once the worker thread has let go of it (a CPU-bound stretch between two
messages finishes first). ``on_listening`` and ``progress`` callbacks are
called on the event loop's thread (``progress=True`` draws its tqdm bars
from the worker).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, Dict, Tuple, TypeVar

from . import _native

T = TypeVar("T")

__all__ = ["run"]


def _call(token: Any, fn: Callable[..., T], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> T:
    with token:
        return fn(*args, **kwargs)


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``await run(psikit.psi.receive, data, listen=...)``: ``fn(*args,
    **kwargs)`` in a worker thread, cancelled with the awaiting task."""
    loop = asyncio.get_running_loop()
    listening = kwargs.get("on_listening")
    if listening is not None:
        kwargs["on_listening"] = lambda addr: loop.call_soon_threadsafe(listening, addr)
    progress = kwargs.get("progress")
    if callable(progress):
        kwargs["progress"] = lambda *report: loop.call_soon_threadsafe(progress, *report)
    token = _native.Cancel()
    fut = loop.run_in_executor(None, functools.partial(_call, token, fn, args, kwargs))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        token.cancel()
        # Let the call end (its connection closed) before the task does.
        await asyncio.wait([fut])
        if not fut.cancelled():
            fut.exception()  # retrieved: the task's cancellation is what counts
        raise
