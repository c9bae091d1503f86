"""What the benchmark runs on: random chains, their Pinocchio twins, a closed-form M.

Random revolute chains, the same model in Pinocchio, and the dense closed-form mass matrix of
Lynch & Park §9.4 (for the complexity comparison). Pinocchio is a test and benchmark dependency
only: it is imported inside the functions.
"""
import numpy as np

from ..core.layout import PRISMATIC
from ..core.spatial import adjoint, inertia_matrix, joint_motion


def random_chain_urdf(n, seed=0):
    """A URDF of n revolute joints in a chain: random axes, origins and inertias (seeded)."""
    rng = np.random.default_rng(seed)
    parts = ['<robot name="chain%d">' % n, '<link name="link0"/>']
    for i in range(1, n + 1):
        mass = float(rng.uniform(0.5, 3.0))
        s = mass * rng.uniform(0.005, 0.05, 3)   # principal moments s_j + s_k: triangle holds
        ixx, iyy, izz = (float(s[1] + s[2]), float(s[0] + s[2]), float(s[0] + s[1]))
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        xyz, rpy = rng.uniform(-0.2, 0.2, 3), rng.uniform(-np.pi, np.pi, 3)
        com = rng.uniform(-0.1, 0.1, 3)
        parts += [
            f'<link name="link{i}"><inertial><origin xyz="{_fmt(com)}"/>'
            f'<mass value="{mass!r}"/><inertia ixx="{ixx!r}" iyy="{iyy!r}" izz="{izz!r}" '
            'ixy="0" ixz="0" iyz="0"/></inertial></link>',
            f'<joint name="joint{i}" type="revolute"><parent link="link{i - 1}"/>'
            f'<child link="link{i}"/><origin xyz="{_fmt(xyz)}" rpy="{_fmt(rpy)}"/>'
            f'<axis xyz="{_fmt(axis)}"/>'
            '<limit lower="-3.1" upper="3.1" effort="100" velocity="2"/></joint>']
    return '\n'.join(parts + ['</robot>'])


def _fmt(x):
    return ' '.join(repr(float(v)) for v in x)


def pinocchio_model(xml, model):
    """(pin_model, pin_data, order): Pinocchio's model of the URDF, reduced to our joints.

    The other joints are locked where our loader locks them (0 clamped into the limits);
    ``x[order]`` is our joint vector x in Pinocchio's order (one coordinate per joint).
    """
    import pinocchio as pin
    full = pin.buildModelFromXML(xml)
    locked = [j for j, name in enumerate(full.names) if j > 0 and name not in model.joint_names]
    q_lock = np.clip(pin.neutral(full), full.lowerPositionLimit, full.upperPositionLimit)
    reduced = pin.buildReducedModel(full, locked, q_lock) if locked else full
    if reduced.nq != model.nv or reduced.nv != model.nv:
        raise ValueError('the benchmark needs one coordinate per joint (no continuous joints)')
    index = {name: reduced.joints[j].idx_q for j, name in enumerate(reduced.names) if j > 0}
    order = np.argsort([index[name] for name in model.joint_names])
    return reduced, reduced.createData(), order


def _block_diagonal(blocks):
    n, (r, c) = len(blocks), blocks[0].shape
    out = np.zeros((n * r, n * c))
    for i, block in enumerate(blocks):
        out[i * r:(i + 1) * r, i * c:(i + 1) * c] = block
    return out


def closed_form_mass_matrix(model, q):
    """M(q) = A^T L^T G L A with dense 6n x 6n matrices (L&P §8.4, the dynamics in closed form).

    A stacks the joint screws A_i (body frames) block-diagonally, G the spatial inertias, and
    block (i, j) of L is Ad_{T_ij} = Ad_{T_i}^{-1} Ad_{T_j} for j an ancestor of i (or i), T_i
    the base pose of body i: L = D^{-1} P D with D = diag(Ad_{T_i}) and P the block pattern of
    ancestors, so that L A θ̇ stacks the body twists. Numpy only; the dense products are O(n^3).
    """
    n = model.nv
    T = []
    for i in range(n):
        motion = joint_motion(model.joint_type[i], model.joint_axis[i], q[i])
        parent = T[model.parent[i]] if model.parent[i] >= 0 else np.eye(4)
        T.append(parent @ model.joint_placement[i] @ motion)
    ancestors = np.eye(n)
    for i in range(n):
        j = model.parent[i]
        while j >= 0:
            ancestors[i, j] = 1.0
            j = model.parent[j]
    L = (_block_diagonal([adjoint(np.linalg.inv(T_i)) for T_i in T])
         @ np.kron(ancestors, np.eye(6)) @ _block_diagonal([adjoint(T_i) for T_i in T]))
    screws = [np.r_[np.zeros(3), a] if kind == PRISMATIC else np.r_[a, np.zeros(3)]
              for a, kind in zip(model.joint_axis, model.joint_type)]
    A = _block_diagonal([screw[:, None] for screw in screws])   # (6n, n)
    G = _block_diagonal([inertia_matrix(inertia) for inertia in model.inertia])
    LA = L @ A
    return LA.T @ G @ LA
