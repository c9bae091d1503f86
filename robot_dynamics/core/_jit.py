"""The one numba decorator every kernel uses, with a cache that works on read-only installs.

``NUMBA_DISABLE_JIT=1`` runs the same kernels as plain Python (slow, but the code path is identical).
"""
import os
import pathlib

import numba


def _writable(path):
    try:
        probe = pathlib.Path(path) / '.write_probe'
        probe.touch()
        probe.unlink()
        return True
    except OSError:
        return False


def _configure_cache():
    """Keep numba's cache beside the sources when writable, else in the user's cache directory."""
    if os.environ.get('NUMBA_CACHE_DIR'):
        return
    package_dir = pathlib.Path(__file__).resolve().parent
    if _writable(package_dir):
        return
    base = pathlib.Path(os.environ.get('XDG_CACHE_HOME', pathlib.Path.home() / '.cache'))
    cache_dir = base / 'robot_dynamics' / 'numba'
    cache_dir.mkdir(parents=True, exist_ok=True)
    numba.config.CACHE_DIR = str(cache_dir)


_configure_cache()

jit = numba.njit(cache=True, nogil=True)
