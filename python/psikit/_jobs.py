"""The options of a bucketed, resumable job (``job_dir=``), shared by
:mod:`psikit.psi` and :mod:`psikit.cpsi` (see ``psikit psi --job-dir``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from ._native import InputError


def _bytes(memory: Union[int, str]) -> int:
    """``memory`` as bytes: an int, or a string such as ``"4G"``, ``"512M"``."""
    if isinstance(memory, int):
        return memory
    text = str(memory).strip().upper()
    shift = {"K": 10, "M": 20, "G": 30, "T": 40}.get(text[-1:], 0)
    digits = text[:-1] if shift else text
    if not digits.isdigit():
        raise InputError(f"memory must be bytes or a size such as '4G' or '512M', got {memory!r}")
    return int(digits) << shift


def _job(
    job_dir: Optional[str],
    resume: bool,
    memory: Union[int, str],
    bucket_items: Optional[int],
    lanes: Optional[int],
    retry: float,
    timeout: Optional[float],
    output: Optional[str],
) -> Optional[Dict[str, Any]]:
    """The native job options, or ``None`` for a one-shot run."""
    if job_dir is None:
        for name, value in (("resume", resume), ("output", output), ("bucket_items", bucket_items),
                            ("lanes", lanes)):
            if value:
                raise InputError(f"{name}= needs job_dir= (a bucketed job)")
        return None
    return {
        "job_dir": os.fspath(job_dir),
        "resume": resume,
        "memory": _bytes(memory),
        "bucket_items": bucket_items,
        "lanes": lanes,
        "retry": retry,
        "idle_timeout": 600.0 if timeout is None else timeout,
        "output": None if output is None else os.fspath(output),
    }
