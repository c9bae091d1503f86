"""URDF -> Model: fixed joints merged, chain or subtree selected, checks that name the link.

Rules (see the package docstring): links joined by fixed joints are merged into their moving parent
body, their inertia lumped. With a ``tip``, the joints on the path base -> tip are the degrees of
freedom; any other joint below the base is locked at 0 (clamped into its limits) and lumped too, so
a gripper's fingers still weigh on the hand. Without a tip the whole tree below ``base`` moves.
Mimic joints are not supported as degrees of freedom (clear error); on a fixed or locked joint they
mean nothing and are ignored.
"""
import math
import pathlib
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .model import Model, PRISMATIC, REVOLUTE
from .spatial import homogeneous, rodrigues, rpy_matrix, standard_parameters, transformed_inertia

MOVING = {'revolute': REVOLUTE, 'continuous': REVOLUTE, 'prismatic': PRISMATIC}
SUPPORTED = set(MOVING) | {'fixed'}


class URDFError(ValueError):
    """A URDF that cannot be turned into a valid model; the message names the link or joint."""


def load_urdf(source, base=None, tip=None, gravity=(0.0, 0.0, -9.81)):
    """Build a Model from a URDF file path or XML string (``base``/``tip``: link names)."""
    robot = _parse_robot(_read(source))
    links = _parse_links(robot)
    joints = _parse_joints(robot, links)
    parent_joint = {j['child']: j for j in joints}
    base = base if base is not None else _root(links, parent_joint)
    for role, name in (('base', base), ('tip', tip)):
        if name is not None and name not in links:
            raise URDFError(f"{role} link '{name}' is not in the URDF")
    chain = _chain(base, tip, parent_joint)
    return _build(links, joints, base, tip, chain, gravity)


def _read(source):
    if isinstance(source, pathlib.Path) or not str(source).lstrip().startswith('<'):
        try:
            return pathlib.Path(source).read_text()
        except OSError as error:
            raise URDFError(f'cannot read URDF file {source}: {error}') from None
    return str(source)


def _parse_robot(text):
    if re.search(r'<\s*xacro:|\$\{', text):
        raise URDFError('the URDF still contains xacro elements (<xacro:...> or ${...}); '
                        'run xacro on it first: robot_dynamics reads plain URDF only')
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise URDFError(f'URDF is not well-formed XML: {error}') from None
    if root.tag != 'robot':
        raise URDFError(f"URDF root element must be <robot>, got <{root.tag}>")
    return root


def _numbers(element, attribute, count, default, where):
    """Parse ``count`` finite floats from an attribute, naming the element on failure."""
    text = element.get(attribute) if element is not None else None
    if text is None:
        return np.array(default, dtype=float)
    try:
        values = np.array([float(s) for s in text.split()])
    except ValueError:
        raise URDFError(f"{where}: {attribute}='{text}' is not {count} numbers") from None
    if values.size != count or not np.all(np.isfinite(values)):
        raise URDFError(f"{where}: {attribute}='{text}' must be {count} finite numbers")
    return values


def _origin(element, where):
    origin = element.find('origin') if element is not None else None
    xyz = _numbers(origin, 'xyz', 3, (0, 0, 0), where)
    rpy = _numbers(origin, 'rpy', 3, (0, 0, 0), where)
    return homogeneous(rpy_matrix(rpy), xyz)


def _parse_links(robot):
    links = {}
    for link in robot.findall('link'):
        name = link.get('name')
        if not name:
            raise URDFError('a <link> has no name')
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
    """Positive semi-definite with principal moments obeying the triangle inequality."""
    moments = np.linalg.eigvalsh(inertia_com)
    tolerance = 1e-9 * max(1.0, np.abs(moments).max())
    if moments[0] < -tolerance:
        raise URDFError(f'{where} inertia is not positive definite (principal moments {moments})')
    if moments[0] + moments[1] < moments[2] - tolerance:
        raise URDFError(f'{where} inertia violates the triangle inequality (principal moments '
                        f'{moments}: I1 + I2 >= I3 fails)')


def _parse_joints(robot, links):
    joints, names, children = [], set(), set()
    for element in robot.findall('joint'):
        name = element.get('name')
        kind = element.get('type')
        where = f"joint '{name}'"
        if not name:
            raise URDFError('a <joint> has no name')
        if name in names:
            raise URDFError(f"duplicate joint name '{name}'")
        if kind not in SUPPORTED:
            raise URDFError(f"{where} has type '{kind}': only revolute, continuous, prismatic and "
                            'fixed joints are supported')
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
    velocity = _numbers(limit, 'velocity', 1, (math.inf,), where + ' limit')[0]
    effort = _numbers(limit, 'effort', 1, (math.inf,), where + ' limit')[0]
    if kind == 'continuous':
        lower, upper = -math.inf, math.inf
    if lower > upper:
        raise URDFError(f'{where} has lower limit {lower} > upper limit {upper}')
    if kind in MOVING and (velocity <= 0 or effort <= 0):
        warnings.warn(f'{where} has a non-positive velocity or effort limit: treated as unlimited')
        velocity = velocity if velocity > 0 else math.inf
        effort = effort if effort > 0 else math.inf
    return lower, upper, velocity, effort


def _root(links, parent_joint):
    for link in links:
        for _ in range(len(links) + 1):
            if link not in parent_joint:
                break
            link = parent_joint[link]['parent']
        else:
            raise URDFError(f"the joints form a cycle through link '{link}'")
    roots = [name for name in links if name not in parent_joint]
    if len(roots) != 1:
        raise URDFError(f'URDF must have exactly one root link, found {len(roots)}'
                        + (f': {roots}' if roots else ' (the joints form a cycle)'))
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
    inertia = _lump(links, frames, len(bodies))
    _check_bodies(bodies, inertia, links, frames)
    return _model(bodies, frames, inertia, base, tip, gravity)


def _locked(joint):
    """Transform of a joint held at 0 (clamped into its limits); identity for a fixed joint."""
    if joint['kind'] == 'fixed':
        return np.eye(4)
    lower, upper = joint['limits'][:2]
    q = min(max(0.0, lower), upper)
    if joint['kind'] == 'prismatic':
        return homogeneous(np.eye(3), joint['axis'] * q)
    return homogeneous(np.array(rodrigues(joint['axis'], q)), np.zeros(3))


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

    gravity = np.asarray(gravity, dtype=float).reshape(3)
    if not np.all(np.isfinite(gravity)):
        raise URDFError(f'gravity must be 3 finite numbers, got {gravity}')
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
