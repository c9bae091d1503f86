"""``python -m robot_dynamics.benchmarks``."""
from . import main

main()
