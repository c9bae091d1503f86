"""Sphinx configuration of the robot_dynamics manual (rosdoc2 reads doc/conf.py too)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '_ext'))
sys.path.insert(0, os.path.dirname(HERE))  # the package, when it is not installed

project = 'robot_dynamics'
author = 'robot_dynamics contributors'
extensions = ['myst_parser', 'sphinx.ext.autodoc', 'sphinx.ext.mathjax', 'node_parameters',
              'benchmark_results']
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build']
myst_heading_anchors = 3
autodoc_member_order = 'bysource'
autodoc_default_options = {'members': True}
html_theme = 'alabaster'
smartquotes = False  # parameter descriptions and code keep their plain quotes
html_static_path = []


def plain_bars(app, what, name, obj, options, lines):
    """Docstrings write |x| for a norm or an absolute value, never a reST substitution."""
    lines[:] = [line.replace('|', r'\|') for line in lines]


def setup(app):
    """Connect plain_bars (conf.py is an extension of its own)."""
    app.connect('autodoc-process-docstring', plain_bars)
