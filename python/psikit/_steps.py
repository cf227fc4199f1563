"""The message level's common shape: a party stepped by hand, bytes in and
bytes out (``psikit.psi.Party``, ``psikit.he.Query``,
``psikit.filter.Query``)."""

from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = ["Stepped"]


class Stepped:
    """A native party (``_native.Party``) driven by :meth:`step`."""

    _native: Any

    def step(self, incoming: Optional[bytes] = None, *, peer_closed: bool = False) -> bytes:
        """Pushes the peer's bytes (none to start), runs the party as far as
        it can go, and returns the bytes to deliver to the peer (possibly
        empty). ``peer_closed=True`` says the peer hung up."""
        return self._native.step(incoming, peer_closed)

    @property
    def done(self) -> bool:
        """Whether the party has finished, successfully or not."""
        return self._native.done

    def _finished(self) -> Dict[str, Any]:
        """The native result dict; raises the party's error if it failed,
        :class:`psikit.InputError` if it has not finished."""
        return self._native.result()
