"""URDF -> Model: fixed joints merged, chain or subtree selected, checks that name the link.

Rules (see the package docstring): links joined by fixed joints are merged into their moving parent
body, their inertia lumped. With a ``tip``, the joints on the path base -> tip are the degrees of
freedom; any other joint below the base is locked at 0 (clamped into its limits) and lumped too, so
a gripper's fingers still weigh on the hand. Without a tip the whole tree below ``base`` moves.

A mimic joint (``<mimic joint multiplier offset>``, q = k q_leader + o) is a dependent coordinate
(Model.mimic, mimic.py) when it and its leader move; when either is locked (off the chain), it is
locked at k q_leader + o with the leader at its locked position. A mimic of a mimic follows the
first one's leader (k and o composed).

Hostile input is refused, never half-read: DTDs (entity expansion, "billion laughs"), files that
are not regular files or larger than MAX_BYTES, numbers that are not plain decimals or exceed
MAX_MAGNITUDE (so no product in the dynamics can overflow; a joint position limit beyond it means
unlimited), xacro elements or attributes left in, and models whose mass matrix is not numerically
positive definite at the reference configuration (a joint that moves no inertia).

Published inertias are often not those of any rigid body (rounding, CAD estimates, slips).
Refused: a negative mass, a negative trace of the inertia (2 ∫ |r|² dm, beyond rounding), and a
negative principal moment beyond INERTIA_TOLERANCE times the largest principal moment of any
link in the model (a negative kinetic energy the rest of the robot does not dwarf). Loaded with
one warning naming every link and by how much (an error with ``strict=True``): a smaller
negative moment, or the triangle inequality I1 + I2 >= I3 failing, each beyond the rounding of
the link's own numbers (INERTIA_ROUNDING of its largest moment, plus MIN_JOINT_INERTIA for CAD
exports' 1e-20 noise). A triangle violation leaves M positive definite:
it is the inertia of no body, but the dynamics stay well defined (M is checked).
"""
import math
import os
import pathlib
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .algorithms.crba import mass_matrix
from .algorithms.pivots import articulated_pivots
from .model import Model, PRISMATIC, REVOLUTE
from .spatial import (homogeneous, inertia_from_urdf, joint_motion, rpy_matrix,
                      standard_parameters, transformed_inertia)

MOVING = {'revolute': REVOLUTE, 'continuous': REVOLUTE, 'prismatic': PRISMATIC}
SUPPORTED = set(MOVING) | {'fixed'}
MAX_BYTES = 64 * 2**20       # the largest real URDFs are well under 1 MB
MAX_MAGNITUDE = 1e9          # |number| in a URDF (SI units); products in the dynamics stay finite
MIN_JOINT_INERTIA = 1e-12    # kg m^2 (revolute) or kg (prismatic): a mote, not a body
MIN_PIVOT = 1e-10            # articulated inertia of a joint / round-off scale of its subtree
INERTIA_ROUNDING = 1e-6      # relative to the link's largest principal moment: printed digits
INERTIA_TOLERANCE = 1e-6     # negative moment / largest moment of any link: refused beyond
XACRO_NAMESPACE = 'http://www.ros.org/wiki/xacro'
DECIMAL = re.compile(r'[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?')


class URDFError(ValueError):
    """A URDF that cannot be turned into a valid model; the message names the link or joint."""


def load_urdf(source, base=None, tip=None, gravity=(0.0, 0.0, -9.81), strict=False):
    """Build a Model from a URDF file path or XML document (str or bytes); base/tip: link names.

    Inertias no rigid body can have but within the tolerance (module docstring) load with one
    warning naming every such link; ``strict=True`` refuses them instead, as it refuses whatever
    else would only be warned about.

    The joints' ``<dynamics damping friction>`` are not read: in most URDFs they are a
    simulator's tuning values, not measured friction (Pinocchio keeps them out of its dynamics
    too). The Model's armature, viscous and Coulomb friction start at zero; set them from a
    configuration or an identification with ``model.replace(armature=..., viscous=...,
    coulomb=...)``.
    """
    gravity = _gravity(gravity)
    robot = _parse_robot(_read(source))
    links = _parse_links(robot)
    notes = _Notes(strict)
    joints = _parse_joints(robot, links, notes)
    _resolve_mimics(joints, notes)
    parent_joint = {j['child']: j for j in joints}
    roots = _roots(links, parent_joint)
    base = base if base is not None else _single_root(roots)
    for role, name in (('base', base), ('tip', tip)):
        if name is not None and not isinstance(name, str):
            raise TypeError(f'{role} must be a link name (str), got {type(name).__name__}')
        if name is not None and name not in links:
            raise URDFError(f"{role} link '{name}' is not in the URDF")
    chain = _chain(base, tip, parent_joint)
    model = _build(links, joints, base, tip, chain, gravity, notes)
    notes.report()
    if model.mimic:
        _check_mass_matrix(model)
    else:
        _check_joint_inertias(model)
    return model


class _Notes:
    """What the loader only warns about: one warning for the inertias, one per other finding.

    With ``strict`` each becomes a URDFError.
    """

    def __init__(self, strict):
        self.strict, self.inertias, self.moments = strict, [], []

    def check_moments(self):
        """Refuse a negative principal moment beyond INERTIA_TOLERANCE of the model's largest."""
        if not self.moments:
            return
        scale = max(np.abs(moments).max() for _, moments in self.moments)
        for where, moments in self.moments:
            if moments[0] < -INERTIA_TOLERANCE * scale - MIN_JOINT_INERTIA:
                raise URDFError(
                    f'{where} inertia is not positive semi-definite (principal moments '
                    f'{moments}): a negative moment of {-moments[0] / scale:.2g} times the '
                    'largest principal moment of any link, beyond the tolerance '
                    f'{INERTIA_TOLERANCE:g}; no body has it')

    def warn(self, message):
        if self.strict:
            raise URDFError(message + ' (strict=True)')
        warnings.warn(message)

    def report(self):
        self.check_moments()
        if self.inertias:
            count = len(self.inertias)
            self.warn(f'{count} link inertia{"s are" if count > 1 else " is"} not that of a '
                      'rigid body, loaded as given: ' + '; '.join(self.inertias))


def _gravity(gravity):
    try:
        g = np.asarray(gravity, dtype=float)
        if g.shape == (3,) and np.all(np.abs(g) <= MAX_MAGNITUDE):
            return g
    except (TypeError, ValueError):
        pass
    raise URDFError(f'gravity must be 3 finite numbers (base frame, m/s^2), got {gravity!r}')


def _read(source):
    """The document: a str or bytes source itself, else the bytes of the file it names."""
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError('the URDF source must be a file path or an XML document (str or bytes), '
                        f'got {type(source).__name__}')
    if isinstance(source, str) and source.lstrip(' \t\r\n\ufeff').startswith('<'):
        return source
    path = pathlib.Path(source)
    try:  # a FIFO or a device (/dev/zero) would block or never end: regular files only
        if path.is_file() and path.stat().st_size <= MAX_BYTES:
            return path.read_bytes()
        problem = f'larger than {MAX_BYTES} bytes' if path.is_file() else \
            'not an existing regular file'
    except OSError as error:
        problem = str(error)
    raise URDFError(f'cannot read URDF file {_shorten(os.fspath(source))}: {problem}')


def _shorten(text, size=60):
    text = str(text)
    return repr(text if len(text) <= size else text[:size] + '...')


class _RefusingDTDs(ET.TreeBuilder):
    """Tree builder that stops at a <!DOCTYPE>: its entities can expand without bound."""

    def doctype(self, name, pubid, system):
        raise URDFError(f'the URDF has a <!DOCTYPE {name}> declaration: DTDs and entity '
                        'declarations are refused (they can expand without bound or read '
                        'files); a URDF needs none')


def _parse_robot(document):
    if len(document) > MAX_BYTES:
        raise URDFError(f'URDF document is larger than {MAX_BYTES} bytes')
    parser = ET.XMLParser(target=_RefusingDTDs())
    try:
        parser.feed(document)
        root = parser.close()
    except URDFError:
        raise
    except (ET.ParseError, ValueError, LookupError) as error:  # encodings: ValueError, LookupError
        if 'unbound prefix' in str(error):
            raise URDFError(f'URDF is not well-formed XML: {error} (an undeclared namespace '
                            'prefix such as xacro:? run xacro on it first)') from None
        raise URDFError(f'URDF is not well-formed XML: {error}') from None
    if root.tag != 'robot':
        raise URDFError(f"URDF root element must be <robot>, got <{_shorten(root.tag)[1:-1]}>")
    _refuse_xacro(root)
    return root


def _refuse_xacro(root):
    """Refuse xacro elements and ${...} in attributes; comments (xacro's banner) do not count."""
    for element in root.iter():
        names = [element.tag, *element.attrib]
        if any(isinstance(n, str) and n.startswith('{' + XACRO_NAMESPACE) for n in names) or \
                any('${' in value for value in element.attrib.values()):
            tag = str(element.tag).replace('{' + XACRO_NAMESPACE + '}', 'xacro:')
            raise URDFError(f'the URDF still contains xacro elements or expressions (in '
                            f'<{_shorten(tag)[1:-1]}>): run xacro on it first; '
                            'robot_dynamics reads plain URDF only')


def _numbers(element, attribute, count, default, where, bound=MAX_MAGNITUDE):
    """Parse ``count`` plain decimals of magnitude <= bound, naming the element on failure."""
    text = element.get(attribute) if element is not None else None
    if text is None:
        return np.array(default, dtype=float)
    words = text.split()
    if len(words) != count or not all(DECIMAL.fullmatch(w) for w in words):
        raise URDFError(f'{where}: {attribute}={_shorten(text)} must be {count} decimal '
                        f'number{"s" if count > 1 else ""}')
    values = [float(w) for w in words]
    if not all(abs(v) <= bound for v in values):
        raise URDFError(f'{where}: {attribute}={_shorten(text)} is out of range: '
                        f'|value| <= {bound:g} expected')
    return np.array(values)


def _origin(element, where):
    origin = element.find('origin') if element is not None else None
    xyz = _numbers(origin, 'xyz', 3, (0, 0, 0), where)
    rpy = _numbers(origin, 'rpy', 3, (0, 0, 0), where)
    return homogeneous(rpy_matrix(rpy), xyz)


def _parse_links(robot):
    links = {}
    for number, link in enumerate(robot.findall('link'), start=1):
        name = link.get('name')
        if not name:
            raise URDFError(f'<link> number {number} in the URDF has no name')
        if name in links:
            raise URDFError(f"duplicate link name '{name}'")
        links[name] = link.find('inertial')
    if not links:
        raise URDFError('URDF has no <link>')
    return links


def _parse_inertial(inertial, where, notes):
    """Standard parameters of a link's <inertial> in the link frame.

    A mass of 0 is a massless frame (a sensor mount, UR's ee_link); a rotational inertia it
    declares is kept, as Pinocchio keeps it.
    """
    mass = _numbers(inertial.find('mass'), 'value', 1, (math.nan,), where + ' mass')[0]
    if not mass >= 0.0:
        raise URDFError(f'{where} has a negative or missing mass ({mass}): mass >= 0 expected '
                        '(0 for a massless frame)')
    tensor = inertial.find('inertia')
    if tensor is None:
        raise URDFError(f'{where} <inertial> has no <inertia>')
    inertia_com = inertia_from_urdf([_numbers(tensor, k, 1, (0.0,), where + ' inertia')[0]
                                    for k in ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')])
    _check_inertia(inertia_com, where, notes)
    T_link_com = _origin(inertial, where + ' inertial origin')
    R = T_link_com[:3, :3]
    return standard_parameters(mass, T_link_com[:3, 3], R @ inertia_com @ R.T)


def _check_inertia(inertia_com, where, notes):
    """Refuse a negative trace; note a negative principal moment or a failed triangle inequality.

    Rounding: INERTIA_ROUNDING of the link's largest principal moment plus MIN_JOINT_INERTIA (the
    1e-20 noise of CAD exports). Whether a negative moment is refused is decided once every link
    is read (``_Notes.check_moments``).
    """
    moments = np.linalg.eigvalsh(inertia_com)
    top = np.abs(moments).max()
    rounding = INERTIA_ROUNDING * top + MIN_JOINT_INERTIA
    if moments.sum() < -rounding:
        raise URDFError(f'{where} inertia is not positive semi-definite (principal moments '
                        f'{moments}): its trace I1 + I2 + I3 = 2 ∫ |r|² dm is negative')
    notes.moments.append((where, moments))
    if moments[0] < -rounding:
        notes.inertias.append(f'{where} has a negative principal moment {moments[0]:.3g} kg m^2 '
                              f'({-moments[0] / top:.1%} of its largest)')
    elif moments[0] + moments[1] < moments[2] - rounding:
        short = moments[2] - moments[0] - moments[1]
        notes.inertias.append(f'{where} fails I1 + I2 >= I3 by {short:.3g} kg m^2 '
                              f'({short / top:.1%} of I3)')


def _parse_joints(robot, links, notes):
    joints, names, children = [], set(), set()
    for number, element in enumerate(robot.findall('joint'), start=1):
        name = element.get('name')
        kind = element.get('type')
        where = f"joint '{name}'"
        if not name:
            raise URDFError(f'<joint> number {number} in the URDF has no name')
        if name in names:
            raise URDFError(f"duplicate joint name '{name}'")
        if kind not in SUPPORTED:
            raise URDFError(f'{where} has type {_shorten(kind)}: only revolute, continuous, '
                            'prismatic and fixed joints are supported')
        parent, child = (_link_ref(element, tag, where, links) for tag in ('parent', 'child'))
        if child in children:
            raise URDFError(f"link '{child}' has two parent joints (second: {where}); "
                            'a URDF must be a tree')
        names.add(name)
        children.add(child)
        joints.append(dict(name=name, kind=kind, parent=parent, child=child,
                           origin=_origin(element, where), axis=_axis(element, kind, where),
                           limits=_limits(element, kind, where, notes),
                           mimic=_mimic(element, where)))
    return joints


def _mimic(element, where):
    """(leader, multiplier, offset) of a <mimic>, or None (URDF defaults 1 and 0)."""
    mimic = element.find('mimic')
    if mimic is None:
        return None
    leader = mimic.get('joint')
    if not leader:
        raise URDFError(f'{where} <mimic> names no joint')
    return (leader, _numbers(mimic, 'multiplier', 1, (1.0,), where + ' mimic')[0],
            _numbers(mimic, 'offset', 1, (0.0,), where + ' mimic')[0])


def _resolve_mimics(joints, notes):
    """Point every moving mimic joint at its root leader: a chain k1 (k2 q + o2) + o1 composed.

    A mimic joint whose leader is not in the URDF (a leftover of an edited file) is an
    independent joint, with a warning: the file does not say what it follows.
    """
    by_name = {j['name']: j for j in joints}
    for joint in joints:
        if joint['mimic'] is not None and joint['mimic'][0] not in by_name:
            notes.warn(f"mimic joint '{joint['name']}' follows joint '{joint['mimic'][0]}', "
                       'which is not in the URDF: it is treated as an independent joint')
            joint['mimic'] = None
    for joint in joints:
        if joint['kind'] not in MOVING or joint['mimic'] is None:
            joint['mimic'] = None
            continue
        leader, k, o = joint['mimic']
        seen = [joint['name']]
        while True:
            if leader in seen:
                raise URDFError(f"mimic joints form a cycle: {' -> '.join(seen + [leader])}")
            step = by_name[leader]
            if step['kind'] not in MOVING or step['mimic'] is None:
                break
            seen.append(leader)
            leader, k, o = step['mimic'][0], k * step['mimic'][1], k * step['mimic'][2] + o
        joint['leader'] = (leader, k, o)


def _link_ref(element, tag, where, links):
    ref = element.find(tag)
    link = ref.get('link') if ref is not None else None
    if link is None:
        raise URDFError(f'{where} has no <{tag} link=...>')
    if link not in links:
        raise URDFError(f"{where} refers to {tag} link '{link}', which is not in the URDF")
    return link


def _axis(element, kind, where):
    axis = _numbers(element.find('axis'), 'xyz', 3, (1, 0, 0), where + ' axis')
    norm = np.linalg.norm(axis)
    if kind in MOVING and norm < 1e-12:
        raise URDFError(f'{where} has a zero axis')
    return axis / norm if norm > 0 else axis


def _limits(element, kind, where, notes):
    """(lower, upper, velocity, effort); absent or non-positive velocity/effort -> inf.

    A position limit beyond MAX_MAGNITUDE (±1e16 is a common way to write "none") is none.
    """
    limit = element.find('limit')
    lower, upper = (_numbers(limit, key, 1, (default,), where + ' limit', math.inf)[0]
                    for key, default in (('lower', -math.inf), ('upper', math.inf)))
    if lower > MAX_MAGNITUDE or upper < -MAX_MAGNITUDE:
        raise URDFError(f'{where} limit: lower {lower:g} or upper {upper:g} is out of range: '
                        f'|value| <= {MAX_MAGNITUDE:g} expected (or a lower limit below '
                        '-1e9, an upper one above 1e9, for none)')
    lower = lower if lower >= -MAX_MAGNITUDE else -math.inf
    upper = upper if upper <= MAX_MAGNITUDE else math.inf
    velocity = _numbers(limit, 'velocity', 1, (math.inf,), where + ' limit', math.inf)[0]
    effort = _numbers(limit, 'effort', 1, (math.inf,), where + ' limit', math.inf)[0]
    if kind == 'continuous':
        lower, upper = -math.inf, math.inf
    if lower > upper:
        raise URDFError(f'{where} has lower limit {lower} > upper limit {upper}')
    if kind in MOVING and (velocity <= 0 or effort <= 0):
        notes.warn(f'{where} has a non-positive velocity or effort limit: treated as unlimited')
        velocity = velocity if velocity > 0 else math.inf
        effort = effort if effort > 0 else math.inf
    return lower, upper, velocity, effort


def _roots(links, parent_joint):
    """The links without a parent joint, after checking that no chain of parents loops (O(n))."""
    reaches_root = set()
    for start in links:
        path, link = set(), start
        while link in parent_joint and link not in reaches_root:
            if link in path:
                raise URDFError(f"the joints form a cycle through link '{link}' (joint "
                                f"'{parent_joint[link]['name']}'): a URDF must be a tree")
            path.add(link)
            link = parent_joint[link]['parent']
        reaches_root |= path
    return [name for name in links if name not in parent_joint]


def _single_root(roots):
    if len(roots) != 1:
        raise URDFError(f'URDF must have exactly one root link, found {len(roots)}: '
                        f"{', '.join(repr(r) for r in roots[:10])}; pass base= to choose one")
    return roots[0]


def _chain(base, tip, parent_joint):
    """Names of the joints on the path base -> tip (None without a tip)."""
    if tip is None:
        return None
    path, link = [], tip
    while link != base:
        if link not in parent_joint or len(path) > len(parent_joint):
            raise URDFError(f"tip link '{tip}' is not below base link '{base}'")
        path.append(parent_joint[link]['name'])
        link = parent_joint[link]['parent']
    return set(path)


def _build(links, joints, base, tip, chain, gravity, notes):
    children = {}
    for joint in joints:
        children.setdefault(joint['parent'], []).append(joint)
    by_name = {j['name']: j for j in joints}
    moving = _moving(base, children, chain)
    bodies, frames = [], {base: (-1, np.eye(4))}
    stack = list(reversed(children.get(base, [])))
    while stack:
        joint = stack.pop()
        body, T_body_parent = frames[joint['parent']]
        if joint['name'] in moving:
            bodies.append(dict(joint=joint, parent=body,
                               placement=T_body_parent @ joint['origin'], link=joint['child']))
            frames[joint['child']] = (len(bodies) - 1, np.eye(4))
        else:
            frames[joint['child']] = (body, T_body_parent @ joint['origin']
                                      @ _locked(joint, by_name))
        stack.extend(reversed(children.get(joint['child'], [])))
    if not any(b['joint']['mimic'] is None for b in bodies):
        raise URDFError(f"no moving joint below base link '{base}'"
                        + (f" on the way to tip link '{tip}'" if tip is not None else '')
                        + ': the model would have no degree of freedom')
    inertia = _lump(links, frames, len(bodies), notes)
    if all(b['joint']['mimic'] is None for b in bodies):   # with mimic: _check_mass_matrix
        _check_bodies(bodies, inertia, links, notes)
    return _model(bodies, frames, inertia, base, tip, gravity)


def _moving(base, children, chain):
    """Names of the joints that move: below the base, on the chain if there is one.

    A mimic joint moves if its root leader does, and is on the chain if there is one.
    """
    below, stack = {}, list(children.get(base, []))
    while stack:
        joint = stack.pop()
        below[joint['name']] = joint
        stack.extend(children.get(joint['child'], []))
    leaders = {name for name, j in below.items() if j['kind'] in MOVING and j['mimic'] is None
               and (chain is None or name in chain)}
    return leaders | {name for name, j in below.items()
                      if j['kind'] in MOVING and j['mimic'] is not None
                      and j['leader'][0] in leaders and (chain is None or name in chain)}


def _locked(joint, by_name):
    """Transform of a joint held still; the identity for a fixed joint.

    A joint is held at 0 clamped into its limits, a mimic joint at k q_leader + o with its
    leader so held (unclamped, as in Pinocchio).
    """
    if joint['kind'] == 'fixed':
        return np.eye(4)
    return joint_motion(MOVING[joint['kind']], joint['axis'], _locked_position(
        joint, by_name))


def _locked_position(joint, by_name):
    if joint['kind'] not in MOVING:
        return 0.0
    if joint['mimic'] is not None:
        leader, k, o = joint['leader']
        return k * _locked_position(by_name[leader], by_name) + o
    lower, upper = joint['limits'][:2]
    return min(max(0.0, lower), upper)


def _lump(links, frames, nb, notes):
    inertia = np.zeros((nb, 10))
    for link, (body, T_body_link) in frames.items():
        if body >= 0 and links[link] is not None:
            parameters = _parse_inertial(links[link], f"link '{link}'", notes)
            inertia[body] += transformed_inertia(parameters, T_body_link)
    return inertia


def _check_bodies(bodies, inertia, links, notes):
    subtree_mass = inertia[:, 0].copy()
    for i in reversed(range(len(bodies))):
        if bodies[i]['parent'] >= 0:
            subtree_mass[bodies[i]['parent']] += subtree_mass[i]
    for i, body in enumerate(bodies):
        where = f"link '{body['link']}' (moved by joint '{body['joint']['name']}')"
        if subtree_mass[i] <= 0.0 and not inertia[i:, 4:7].any():
            raise URDFError(f'{where} has no <inertial>, nor has anything it carries: '
                            'the joint would move nothing with mass')
        if links[body['link']] is None and inertia[i, 0] <= 0.0:
            notes.warn(f'{where} has no <inertial> and nothing with mass is fixed to it; '
                       'it is treated as massless')


def _model(bodies, frames, inertia, base, tip, gravity):
    """The Model: one body per moving joint; the mimic joints' bodies are dependent."""
    independent = [b for b in bodies if b['joint']['mimic'] is None]

    def column(key, index):
        return np.array([b['joint'][key][index] for b in independent], dtype=float)

    names = tuple(frames)
    return Model(
        joint_names=tuple(b['joint']['name'] for b in independent),
        joint_type=np.array([MOVING[b['joint']['kind']] for b in bodies], dtype=int),
        parent=np.array([b['parent'] for b in bodies], dtype=int),
        joint_axis=np.array([b['joint']['axis'] for b in bodies]).reshape(-1, 3),
        joint_placement=np.array([b['placement'] for b in bodies]).reshape(-1, 4, 4),
        inertia=inertia,
        lower=column('limits', 0), upper=column('limits', 1),
        velocity_limit=column('limits', 2), effort_limit=column('limits', 3),
        frame_names=names,
        frame_body=np.array([frames[n][0] for n in names], dtype=int),
        frame_placement=np.array([frames[n][1] for n in names]).reshape(-1, 4, 4),
        base=base, tip=tip, gravity=gravity,
        body_names=tuple(b['joint']['name'] for b in bodies),
        mimic=tuple((b['joint']['name'], *b['joint']['leader']) for b in bodies
                    if b['joint']['mimic'] is not None))


def _check_joint_inertias(model):
    """Refuse a mass matrix that is (numerically) singular at q0 = 0 clamped into the limits.

    The articulated-body pivots D_i (algorithms/pivots.py) are those of M = U D U^T, so M is
    positive definite iff all are positive. Each must exceed MIN_JOINT_INERTIA and MIN_PIVOT
    times its round-off scale, else forward dynamics divides by (next to) zero. Checked leaves
    first, so the joint named is the one at fault.
    """
    pivot, scale = articulated_pivots(model, model.neutral_position)
    for i in reversed(range(model.nb)):
        floor = max(MIN_PIVOT * scale[i], MIN_JOINT_INERTIA)
        if not pivot[i] > floor:
            unit = 'kg' if model.joint_type[i] == PRISMATIC else 'kg m^2'
            raise URDFError(
                f"joint '{model.joint_names[i]}' moves an inertia of {pivot[i]:.3g} {unit} at "
                'q = 0 (clamped into the limits) while the joints it carries are free, not above '
                f'{floor:.3g}: the mass matrix is singular there. What it carries is next to '
                'massless, or point masses on its axis, or it shares its axis with a joint it '
                'carries')


def _check_mass_matrix(model):
    """With mimic joints: refuse M = G^T M_body G if it is singular at q0.

    The pivots of the bodies' M do not apply: a massless finger may follow a leader that moves
    mass. The smallest eigenvalue must exceed MIN_JOINT_INERTIA and MIN_PIVOT times the largest; the
    joint named is the one its eigenvector moves most.
    """
    w, vectors = np.linalg.eigh(mass_matrix(model, model.neutral_position))
    floor = max(MIN_PIVOT * w[-1], MIN_JOINT_INERTIA)
    if not w[0] > floor:
        name = model.joint_names[int(np.argmax(np.abs(vectors[:, 0])))]
        raise URDFError(f"joint '{name}' (with the mimic joints that follow it) moves an "
                        f'inertia of {w[0]:.3g} at q = 0 (clamped into the limits), not above '
                        f'{floor:.3g}: the mass matrix is singular there')
