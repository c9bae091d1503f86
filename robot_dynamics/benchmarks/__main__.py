"""``python -m robot_dynamics.benchmarks``: run with single-threaded BLAS.

numpy is imported with the package, before this module runs, so the variable that keeps
OpenBLAS to one thread is set by starting again. Pinocchio's composed Λ uses numpy's small
matrix products, on which a multi-threaded OpenBLAS only loses time, and the closed-form M is
then timed in the CPU time of one thread like everything else single-threaded.
"""
import os
import sys

if os.environ.get('OPENBLAS_NUM_THREADS') != '1':
    os.environ['OPENBLAS_NUM_THREADS'] = '1'
    os.execv(sys.executable, [sys.executable, '-m', 'robot_dynamics.benchmarks', *sys.argv[1:]])

from . import main  # noqa: E402

main()
