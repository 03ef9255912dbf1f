"""BLAS threads: one per process while models fit.

Example:
    >>> with one_blas_thread():
    ...     pass
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

__all__ = ["one_blas_thread"]

_BLAS: Any = None  # this process's threadpoolctl controller, made at the first limit


def one_blas_thread() -> AbstractContextManager[Any]:
    """Limit BLAS to one thread in this process, until the ``with`` block ends (or for good, called alone).

    Small matrices factorise faster on one thread, a fit's parallelism comes
    from its starts, and a limit that changed while another start ran would
    make results depend on timing. One ``threadpoolctl`` controller serves the
    process: made afresh for every limit (as ``threadpool_limits`` does), it
    scanned every loaded library, about 5 ms a time in a process that has
    imported Ray. It is made at the first limit, once NumPy's and SciPy's
    BLAS are loaded (a worker process's initialiser runs before anything else
    has imported SciPy: a controller made then would leave SciPy's LAPACK
    calls on every core, four times slower in a fit).
    """
    global _BLAS
    if _BLAS is None:
        import numpy  # noqa: F401 - loads the BLAS libraries the controller must see
        import scipy.linalg  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")
