"""The numba decorators of every kernel, and a compile cache that never serves stale code.

``jit`` compiles a kernel lazily, in nopython mode, releasing the GIL, with fused multiply-adds
allowed (fastmath 'contract' only: rounding as good or better, nothing assumed about NaN or
infinities). ``parallel(kernel)`` compiles the same source again with ``parallel=True``, so that
its ``numba.prange`` loops run on several threads (``prange`` is ``range`` everywhere else).
``NUMBA_DISABLE_JIT=1`` makes both return the plain Python function: the same code runs as
Python.

The compiled code is cached on disk. Numba stamps a cached kernel with its own source file only,
so an edit in a helper it calls from another module would be served stale; here each kernel is
stamped with a digest of every kernel source too (SOURCES: the layout constants, spatial.py, the
argument checks, the algorithms, and the command limits and CDR reader that the controller's
compiled cycle calls). The cache sits in ``__pycache__`` beside the sources when
that is writable, else in the user's cache directory (``$XDG_CACHE_HOME/numba``, by default
``~/.cache/numba``); ``NUMBA_CACHE_DIR`` overrides both. With no writable place the kernels are
compiled on every start instead.

``first_call`` gives the public functions the kernel's machine code for one state's argument
types, called without numba's type dispatch (about 0.1 µs less per call): the caller checks the
types, since an array of another dimension or dtype would be read as if it had these.
"""
import hashlib
import pathlib
import types
import warnings

import numba
from numba.core import caching, dispatcher

_CORE = pathlib.Path(__file__).resolve().parent
SOURCES = sorted([_CORE / '_jit.py', _CORE / 'layout.py', _CORE / 'spatial.py',
                  _CORE / 'arguments.py', _CORE / 'limits.py', *(_CORE / 'algorithms').glob('*.py'),
                  _CORE.parent / 'nodes' / 'cdr.py'])   # kernels that kernels elsewhere call
STAMP = hashlib.sha256(b''.join(path.read_bytes() for path in SOURCES)).hexdigest()


class _Stamped:
    def get_source_stamp(self):   # the kernel's own file (numba's stamp) and every kernel source
        return super().get_source_stamp(), STAMP


class _UserProvided(_Stamped, caching.UserProvidedCacheLocator):
    pass


class _InTree(_Stamped, caching.InTreeCacheLocator):
    pass


class _UserWide(_Stamped, caching.UserWideCacheLocator):
    pass


class _CacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_UserProvided, _InTree, _UserWide]


class _Cache(caching.FunctionCache):
    _impl_class = _CacheImpl


def _compile(function, **options):
    kernel = numba.njit(function, nogil=True, fastmath={'contract'}, **options)
    if isinstance(kernel, dispatcher.Dispatcher):  # not under NUMBA_DISABLE_JIT
        try:
            kernel._cache = _Cache(function)   # what Dispatcher.enable_caching() does
        except RuntimeError as error:          # no writable cache directory at all
            warnings.warn(f'robot_dynamics: numba kernels are not cached ({error})',
                          stacklevel=3)
    return kernel


def jit(function):
    """Compile ``function`` with numba (lazily, nogil, cached)."""
    return _compile(function)


def parallel(kernel):
    """The same source as ``kernel``, compiled with ``parallel=True`` (its own cache entry)."""
    function = getattr(kernel, 'py_func', kernel)
    twin = types.FunctionType(function.__code__, function.__globals__,
                              function.__name__ + '_parallel', function.__defaults__,
                              function.__closure__)
    twin.__qualname__ = function.__qualname__ + '_parallel'
    twin.__doc__ = function.__doc__
    return _compile(twin, parallel=True)


def first_call(name, namespace, kernel, *argument_types):
    """A stand-in for ``namespace[name]``: its first call puts the kernel's entry point there.

    That entry point is ``kernel`` compiled for ``argument_types`` (or loaded from the cache);
    under NUMBA_DISABLE_JIT it is the kernel itself.
    """
    def compile_and_call(*arguments):
        entry = kernel
        if isinstance(kernel, dispatcher.Dispatcher):
            entry = kernel.compile(argument_types)
        namespace[name] = entry
        return entry(*arguments)
    return compile_and_call
