"""NumPy's matrix products on the calling thread alone, for the direct export's forward pass.

NumPy's OpenBLAS splits a ``[1000, 256] @ [256, 256]`` product over every core, and its
threads busy-wait for each other. On a 2-core learner host whose cores are busy training,
that is the worst case: measured there, 18.8 ms median for that product with two threads,
0.93 ms with one. ``single_threaded()`` sets OpenBLAS's *thread-local* thread count
(``openblas_set_num_threads_local``, OpenBLAS >= 0.3.27) for the duration, so no other
thread of the process is affected. Where NumPy uses another BLAS it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np


@functools.cache
def _set_local_threads() -> Callable[[int], int] | None:
    """OpenBLAS's ``openblas_set_num_threads_local`` in NumPy's own copy, if there is one."""
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(libs.glob("libscipy_openblas*.so*")):
        try:
            fn = ctypes.CDLL(str(path)).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn
    return None


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """NumPy's BLAS on this thread uses one thread until the block ends."""
    set_threads = _set_local_threads()
    if set_threads is None:
        yield
        return
    previous = set_threads(1)
    try:
        yield
    finally:
        set_threads(previous)
