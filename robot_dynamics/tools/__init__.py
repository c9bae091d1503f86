"""Offline tools: record joint states to a file, fit payload, friction, armature and links to it.

A module that is an executable has its name: ``record_joint_states`` (a node) writes a
recording (its file layout: ``recording.py``); ``fit_dynamics`` (a command line; the numerics in
``fitting.py``) fits it and writes the nodes' parameter YAML; ``excite`` plans an identification
experiment and runs it on the arm (``excitation_run.py``), ``excitation_check.py`` says whether
every joint moved as planned; ``pfl_map`` maps permissible speeds.
"""
