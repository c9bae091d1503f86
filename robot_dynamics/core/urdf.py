"""URDF -> Model: fixed joints merged, chain or subtree selected, checks that name the link.

Rules (see the package docstring): links joined by fixed joints are merged into their moving parent
body, their inertia lumped. With a ``tip``, the joints on the path base -> tip are the degrees of
freedom; any other joint below the base is locked at 0 (clamped into its limits) and lumped too, so
a gripper's fingers still weigh on the hand. Without a tip the whole tree below ``base`` moves.
Mimic joints are not supported as degrees of freedom (clear error); on a fixed or locked joint they
mean nothing and are ignored.

Hostile input is refused, never half-read: DTDs (entity expansion, "billion laughs"), files that
are not regular files or larger than MAX_BYTES, numbers that are not plain decimals or exceed
MAX_MAGNITUDE (so no product in the dynamics can overflow), and models whose mass matrix is not
numerically positive definite at the reference configuration (a joint that moves no inertia).
"""
import math
import os
import pathlib
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .model import Model, PRISMATIC, REVOLUTE
from .spatial import homogeneous, rodrigues, rpy_matrix, standard_parameters, transformed_inertia

MOVING = {'revolute': REVOLUTE, 'continuous': REVOLUTE, 'prismatic': PRISMATIC}
SUPPORTED = set(MOVING) | {'fixed'}
MAX_BYTES = 64 * 2**20       # the largest real URDFs are well under 1 MB
MAX_MAGNITUDE = 1e9          # |number| in a URDF (SI units); products in the dynamics stay finite
MIN_JOINT_INERTIA = 1e-12    # kg m^2 (revolute) or kg (prismatic): a mote, not a body
MIN_PIVOT = 1e-10            # articulated inertia of a joint / round-off scale of its subtree
XACRO = re.compile(r'<\s*xacro:|\$\{')
DECIMAL = re.compile(r'[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?')


class URDFError(ValueError):
    """A URDF that cannot be turned into a valid model; the message names the link or joint."""


def load_urdf(source, base=None, tip=None, gravity=(0.0, 0.0, -9.81)):
    """Build a Model from a URDF file path or XML document (str or bytes); base/tip: link names.

    The joints' ``<dynamics damping friction>`` are not read: in most URDFs they are a
    simulator's tuning values, not measured friction (Pinocchio keeps them out of its dynamics
    too). The Model's armature, viscous and Coulomb friction start at zero; set them from a
    configuration or an identification with ``model.replace(armature=..., viscous=...,
    coulomb=...)``.
    """
    gravity = _gravity(gravity)
    robot = _parse_robot(_read(source))
    links = _parse_links(robot)
    joints = _parse_joints(robot, links)
    parent_joint = {j['child']: j for j in joints}
    roots = _roots(links, parent_joint)
    base = base if base is not None else _single_root(roots)
    for role, name in (('base', base), ('tip', tip)):
        if name is not None and not isinstance(name, str):
            raise TypeError(f'{role} must be a link name (str), got {type(name).__name__}')
        if name is not None and name not in links:
            raise URDFError(f"{role} link '{name}' is not in the URDF")
    chain = _chain(base, tip, parent_joint)
    model = _build(links, joints, base, tip, chain, gravity)
    _check_joint_inertias(model)
    return model


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
    text = document if isinstance(document, str) else document.decode('utf-8', 'replace')
    if XACRO.search(text):
        raise URDFError('the URDF still contains xacro elements (<xacro:...> or ${...}); '
                        'run xacro on it first: robot_dynamics reads plain URDF only')
    parser = ET.XMLParser(target=_RefusingDTDs())
    try:
        parser.feed(document)
        root = parser.close()
    except URDFError:
        raise
    except (ET.ParseError, ValueError, LookupError) as error:  # encodings: ValueError, LookupError
        raise URDFError(f'URDF is not well-formed XML: {error}') from None
    if root.tag != 'robot':
        raise URDFError(f"URDF root element must be <robot>, got <{_shorten(root.tag)[1:-1]}>")
    return root


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


def _parse_inertial(inertial, where):
    """Standard parameters of a link's <inertial> in the link frame."""
    mass = _numbers(inertial.find('mass'), 'value', 1, (math.nan,), where + ' mass')[0]
    if not mass > 0.0:
        raise URDFError(f'{where} has non-positive or missing mass ({mass}): a moving body needs '
                        'mass > 0 (omit <inertial> for a massless frame)')
    tensor = inertial.find('inertia')
    if tensor is None:
        raise URDFError(f'{where} <inertial> has no <inertia>')
    keys = ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz')
    ixx, iyy, izz, ixy, ixz, iyz = (_numbers(tensor, k, 1, (0.0,), where + ' inertia')[0]
                                    for k in keys)
    inertia_com = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    _check_inertia(inertia_com, where)
    T_link_com = _origin(inertial, where + ' inertial origin')
    R = T_link_com[:3, :3]
    return standard_parameters(mass, T_link_com[:3, 3], R @ inertia_com @ R.T)


def _check_inertia(inertia_com, where):
    """Check positive semi-definiteness and the triangle inequality of the principal moments.

    Both up to a relative tolerance, for the rounding of printed numbers.
    """
    moments = np.linalg.eigvalsh(inertia_com)
    tolerance = 1e-6 * np.abs(moments).max()
    if moments[0] < -tolerance:
        raise URDFError(f'{where} inertia is not positive definite (principal moments {moments})')
    if moments[0] + moments[1] < moments[2] - tolerance:
        raise URDFError(f'{where} inertia violates the triangle inequality (principal moments '
                        f'{moments}: I1 + I2 >= I3 fails)')


def _parse_joints(robot, links):
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
                           limits=_limits(element, kind, where),
                           mimic=element.find('mimic') is not None))
    return joints


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


def _limits(element, kind, where):
    """(lower, upper, velocity, effort); absent or non-positive velocity/effort -> inf."""
    limit = element.find('limit')
    lower = _numbers(limit, 'lower', 1, (-math.inf,), where + ' limit')[0]
    upper = _numbers(limit, 'upper', 1, (math.inf,), where + ' limit')[0]
    velocity = _numbers(limit, 'velocity', 1, (math.inf,), where + ' limit', math.inf)[0]
    effort = _numbers(limit, 'effort', 1, (math.inf,), where + ' limit', math.inf)[0]
    if kind == 'continuous':
        lower, upper = -math.inf, math.inf
    if lower > upper:
        raise URDFError(f'{where} has lower limit {lower} > upper limit {upper}')
    if kind in MOVING and (velocity <= 0 or effort <= 0):
        warnings.warn(f'{where} has a non-positive velocity or effort limit: treated as unlimited')
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


def _build(links, joints, base, tip, chain, gravity):
    children = {}
    for joint in joints:
        children.setdefault(joint['parent'], []).append(joint)
    bodies, frames = [], {base: (-1, np.eye(4))}
    stack = list(reversed(children.get(base, [])))
    while stack:
        joint = stack.pop()
        body, T_body_parent = frames[joint['parent']]
        moving = joint['kind'] in MOVING and (chain is None or joint['name'] in chain)
        if moving:
            if joint['mimic']:
                raise URDFError(f"joint '{joint['name']}' is a mimic joint: mimic joints are not "
                                'supported as degrees of freedom; choose a tip that leaves it off '
                                'the chain (it is then locked) or remove the <mimic>')
            bodies.append(dict(joint=joint, parent=body,
                               placement=T_body_parent @ joint['origin'], link=joint['child']))
            frames[joint['child']] = (len(bodies) - 1, np.eye(4))
        else:
            frames[joint['child']] = (body, T_body_parent @ joint['origin'] @ _locked(joint))
        stack.extend(reversed(children.get(joint['child'], [])))
    if not bodies:
        raise URDFError(f"no moving joint below base link '{base}'"
                        + (f" on the way to tip link '{tip}'" if tip is not None else '')
                        + ': the model would have no degree of freedom')
    inertia = _lump(links, frames, len(bodies))
    _check_bodies(bodies, inertia, links, frames)
    return _model(bodies, frames, inertia, base, tip, gravity)


def _locked(joint):
    """Transform of a joint held at 0 (clamped into its limits); identity for a fixed joint."""
    if joint['kind'] == 'fixed':
        return np.eye(4)
    lower, upper = joint['limits'][:2]
    return _joint_motion(MOVING[joint['kind']], joint['axis'], min(max(0.0, lower), upper))


def _joint_motion(kind, axis, q):
    """exp([A] q): a rotation about or a translation along the unit axis."""
    if kind == PRISMATIC:
        return homogeneous(np.eye(3), axis * q)
    return homogeneous(np.array(rodrigues(axis, q)), np.zeros(3))


def _lump(links, frames, nb):
    inertia = np.zeros((nb, 10))
    for link, (body, T_body_link) in frames.items():
        if body >= 0 and links[link] is not None:
            parameters = _parse_inertial(links[link], f"link '{link}'")
            inertia[body] += transformed_inertia(parameters, T_body_link)
    return inertia


def _check_bodies(bodies, inertia, links, frames):
    subtree_mass = inertia[:, 0].copy()
    for i in reversed(range(len(bodies))):
        if bodies[i]['parent'] >= 0:
            subtree_mass[bodies[i]['parent']] += subtree_mass[i]
    for i, body in enumerate(bodies):
        where = f"link '{body['link']}' (moved by joint '{body['joint']['name']}')"
        if subtree_mass[i] <= 0.0:
            raise URDFError(f'{where} has no <inertial>, nor has anything it carries: '
                            'the joint would move nothing with mass')
        if links[body['link']] is None and inertia[i, 0] <= 0.0:
            warnings.warn(f'{where} has no <inertial> and nothing with mass is fixed to it; '
                          'it is treated as massless')


def _model(bodies, frames, inertia, base, tip, gravity):
    def column(key, index=None):
        values = [b['joint'][key] if index is None else b['joint'][key][index] for b in bodies]
        return np.array(values, dtype=float).reshape(len(bodies), -1)

    names = tuple(frames)
    return Model(
        joint_names=tuple(b['joint']['name'] for b in bodies),
        joint_type=np.array([MOVING[b['joint']['kind']] for b in bodies], dtype=int),
        parent=np.array([b['parent'] for b in bodies], dtype=int),
        joint_axis=column('axis').reshape(-1, 3),
        joint_placement=np.array([b['placement'] for b in bodies]).reshape(-1, 4, 4),
        inertia=inertia,
        lower=column('limits', 0).ravel(), upper=column('limits', 1).ravel(),
        velocity_limit=column('limits', 2).ravel(), effort_limit=column('limits', 3).ravel(),
        frame_names=names,
        frame_body=np.array([frames[n][0] for n in names], dtype=int),
        frame_placement=np.array([frames[n][1] for n in names]).reshape(-1, 4, 4),
        base=base, tip=tip, gravity=gravity)


def _check_joint_inertias(model):
    """Refuse a mass matrix that is (numerically) singular at q0 = 0 clamped into the limits.

    The articulated-body pivot D_i = A_i^T I^A_i A_i is the inertia joint i moves while the
    joints it carries are free; the D_i are the pivots of M = U D U^T with children eliminated
    before parents, so M is positive definite iff all are positive. Computed in body coordinates,
    they are free of the round-off that distances from the base bring to the kernels; each must
    exceed MIN_JOINT_INERTIA and MIN_PIVOT times that round-off, else forward dynamics divides by
    (next to) zero. Checked leaves first, so the joint named is the one at fault.
    """
    pivot, scale = _pivots(model, model.neutral_position)
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


def _pivots(model, q0):
    """Articulated-body pivots D_i at q0, and their round-off scales.

    I^A_i = G_i + sum over children c of X_c^T (I^A_c - U_c U_c^T / D_c) X_c with U_c = I^A_c A_c
    and D_c = A_c^T U_c (the articulated-body inertias of Featherstone's Rigid Body Dynamics
    Algorithms, ch. 7), X_c the twist transform parent -> child.
    The scale is that of the composite inertia G^c_i: tr(I_O) / 2 + m |p_i|^2 for a revolute
    joint (I_O about the body origin, p_i that origin in the base frame), m for a prismatic one.
    """
    T_parent = [X @ _joint_motion(kind, axis, q) for X, kind, axis, q in
                zip(model.joint_placement, model.joint_type, model.joint_axis, q0)]
    T_base = []
    for T, parent in zip(T_parent, model.parent):
        T_base.append(T_base[parent] @ T if parent >= 0 else T)
    composite = [_spatial_inertia(parameters) for parameters in model.inertia]
    articulated = [G.copy() for G in composite]
    pivot, scale = np.empty(model.nb), np.empty(model.nb)
    for i in reversed(range(model.nb)):
        prismatic = model.joint_type[i] == PRISMATIC
        A = np.concatenate([np.zeros(3), model.joint_axis[i]] if prismatic else
                           [model.joint_axis[i], np.zeros(3)])
        U = articulated[i] @ A
        pivot[i] = A @ U
        G, p = composite[i], T_base[i][:3, 3]
        scale[i] = G[3, 3] if prismatic else np.trace(G[:3, :3]) / 2 + G[3, 3] * (p @ p)
        parent = model.parent[i]
        if parent >= 0:
            X = _twist_transform(T_parent[i])
            composite[parent] += X.T @ G @ X
            if pivot[i] > 0.0:  # else the model is refused at joint i
                articulated[parent] += X.T @ (articulated[i] - np.outer(U, U) / pivot[i]) @ X
    return pivot, scale


def _spatial_inertia(parameters):
    """G = [[I, [h]], [[h]^T, m 1]] of standard parameters (L&P eq. 8.32 about the body origin)."""
    m, hx, hy, hz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz = parameters
    H = np.array([[0.0, -hz, hy], [hz, 0.0, -hx], [-hy, hx, 0.0]])
    return np.block([[np.array([[Ixx, Ixy, Ixz], [Ixy, Iyy, Iyz], [Ixz, Iyz, Izz]]), H],
                     [H.T, m * np.eye(3)]])


def _twist_transform(T):
    """Ad of T^-1: a twist in the parent's coordinates seen in the child's, T the child's pose."""
    R, p = T[:3, :3], T[:3, 3]
    P = np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])
    return np.block([[R.T, np.zeros((3, 3))], [-R.T @ P, R.T]])
