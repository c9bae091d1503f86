"""Joint-state recordings: the file layout of ``record_joint_states`` and ``fit_dynamics``.

N samples of nj joints, columns in the recorded joint order:

==================  ========  ==============================================================
name                shape     content
==================  ========  ==============================================================
t                   (N,)      s since ``start_time``, from the header stamps (increasing)
q                   (N, nj)   positions, rad or m
v                   (N, nj)   velocities, rad/s or m/s; absent if a message carried none
tau                 (N, nj)   efforts, N m or N
joint_names         (nj,)     joint names: the column order of q, v and tau
start_time          ()        stamp of the first sample, s (ROS time: wall clock or simulated)
robot_description   ()        URDF XML if the recorder had it, else ''
urdf                ()        URDF path given to the recorder, else ''
format              ()        'robot_dynamics.recording 1'
==================  ========  ==============================================================

Two encodings, chosen by the file extension:

- ``.npz``: ``numpy.load(path)`` gives the arrays above (strings as unicode arrays, no pickles);
- ``.csv``: ``# key: value`` comment lines for the scalars (JSON-encoded values), then a
  header row ``t,q.<joint>,...,v.<joint>,...,tau.<joint>,...`` and one row per sample, numbers
  with 17 significant digits (exact); ``pandas.read_csv(path, comment='#')`` reads it.
"""
import dataclasses
import json
import os
import pathlib

import numpy as np

FORMAT = 'robot_dynamics.recording 1'
EXTENSIONS = ('.npz', '.csv')
SCALARS = ('start_time', 'robot_description', 'urdf')


@dataclasses.dataclass
class Recording:
    """The arrays and metadata of a recording (module docstring); ``v`` may be None."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    joint_names: tuple
    start_time: float = 0.0
    robot_description: str = ''
    urdf: str = ''

    def __post_init__(self):
        self.joint_names = tuple(str(n) for n in self.joint_names)
        self.t = np.asarray(self.t, dtype=float)
        shape = (len(self.t), len(self.joint_names))
        for name in ('q', 'v', 'tau'):
            x = getattr(self, name)
            if x is None and name == 'v':
                continue
            x = np.asarray(x, dtype=float)
            x = x.reshape(0, shape[1]) if x.size == 0 else x
            if self.t.ndim != 1 or x.shape != shape:
                raise ValueError(f'{name} has shape {x.shape}; with {shape[0]} stamps and '
                                 f'{shape[1]} joints it must be {shape}')
            setattr(self, name, x)
        self.start_time = float(self.start_time)

    @property
    def columns(self):
        """{'q': q, 'v': v, 'tau': tau} without an absent v."""
        return {k: x for k, x in (('q', self.q), ('v', self.v), ('tau', self.tau))
                if x is not None}


def from_stamps(stamps, q, v, tau, joint_names, **metadata):
    """The Recording of samples stamped ``stamps`` (int ns): t from the first, start_time its s.

    ``v`` None or with a NaN (a message without velocities): no velocities.
    """
    stamps = np.asarray(stamps, dtype=np.int64)
    v = None if v is None or np.isnan(v).any() else v
    return Recording((stamps - stamps[0]) * 1e-9, q, v, tau, joint_names,
                     start_time=stamps[0] * 1e-9, **metadata)


def check_path(path):
    """The extension's encoding ('.npz' or '.csv'), or ValueError."""
    suffix = pathlib.Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise ValueError(f"a recording file ends in .npz or .csv, got '{path}'")
    return suffix


def save(recording, path):
    """Write ``recording`` to ``path`` (.npz or .csv) through a temporary file and a rename."""
    suffix = check_path(path)
    scalars = {k: getattr(recording, k) for k in SCALARS}
    temporary = f'{path}.part'
    with open(temporary, 'wb' if suffix == '.npz' else 'w') as f:
        if suffix == '.npz':
            np.savez(f, t=recording.t, **recording.columns,
                     joint_names=np.array(recording.joint_names, dtype=str),
                     format=np.array(FORMAT), **{k: np.array(x) for k, x in scalars.items()})
        else:
            f.write(''.join(f'# {k}: {json.dumps(x)}\n'
                            for k, x in {'format': FORMAT, **scalars}.items()))
            header = ['t'] + [f'{k}.{j}' for k in recording.columns
                              for j in recording.joint_names]
            table = np.column_stack([recording.t, *recording.columns.values()])
            np.savetxt(f, table, fmt='%.17g', delimiter=',', header=','.join(header),
                       comments='')
    os.replace(temporary, path)


def load(path):
    """Read a recording written by ``save`` (or by hand, following the layout)."""
    if check_path(path) == '.npz':
        with np.load(path, allow_pickle=False) as f:
            found = {k: f[k] for k in f.files}
        return Recording(found['t'], found['q'], found.get('v'), found['tau'],
                         found['joint_names'].tolist(),
                         **{k: found[k].item() for k in SCALARS if k in found})
    scalars, header = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith('#'):
                key, _, value = line[1:].partition(':')
                scalars[key.strip()] = json.loads(value)
            else:
                header = line.strip().split(',')
                break
        table = np.loadtxt(f, delimiter=',', ndmin=2).reshape(-1, len(header or ()))
    if not header or header[0] != 't':
        raise ValueError(f"{path}: no header row starting with 't'")
    kinds = [h.split('.', 1) for h in header[1:]]
    joints = [name for kind, name in kinds if kind == 'q']
    columns = {kind: table[:, [header.index(f'{kind}.{j}') for j in joints]]
               for kind in ('q', 'v', 'tau') if f'{kind}.{joints[0]}' in header} if joints else {}
    if 'q' not in columns or 'tau' not in columns:
        raise ValueError(f'{path}: needs q.<joint> and tau.<joint> columns')
    return Recording(table[:, 0], columns['q'], columns.get('v'), columns['tau'], joints,
                     **{k: scalars[k] for k in SCALARS if k in scalars})
