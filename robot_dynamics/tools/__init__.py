"""Offline tools: record joint states to a file, fit payload, friction, armature and links to it.

``record_joint_states`` (``record.py``, a node) writes a recording (layout in ``recording.py``);
``fit_dynamics`` (``fit.py``, a command line) fits it and writes the nodes' parameter YAML.
"""
