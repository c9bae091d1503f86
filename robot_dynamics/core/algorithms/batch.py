"""The loop of a batched kernel over its states, in chunks that each get their own scratch.

An entry kernel runs its one-state algorithm on each row of 2-D arguments::

    for c in prange(chunk_count(q)):
        scratch = np.empty_like(ws)      # one allocation per CHUNK states
        for k in chunk(c, q):
            algorithm(table, q[k], ..., scratch, out[k])

``prange`` is ``range`` in the serial kernels; in their ``parallel`` twins the chunks run on
numba's threads, and the per-chunk scratch keeps them apart.
"""
from .._jit import jit

CHUNK = 64


@jit
def chunk_count(q):
    """Number of chunks of the rows of q."""
    return (q.shape[0] + CHUNK - 1) // CHUNK


@jit
def chunk(c, q):
    """The row indices of chunk c."""
    return range(c * CHUNK, min(q.shape[0], (c + 1) * CHUNK))


@jit
def wrench_row(f_ext, k):
    """f_ext[k] of (N, nb, 6) wrenches; (nb, 6) ones are shared by every state."""
    if f_ext.ndim == 2:
        return f_ext
    return f_ext[k]
