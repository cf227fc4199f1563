"""``python -m psikit.scale``: see :func:`psikit.scale._main`."""

from . import _main

_main()
