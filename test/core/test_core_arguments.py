"""Wrong arguments to the public core functions: a clear error naming what was expected.

For every public function and every array argument: a wrong shape, a string, None, complex
numbers, objects -> ValueError or TypeError whose message names the argument and the expected
shape (7,) of the 7-joint Panda; integers are numbers and are accepted. Unknown frames name the
known ones, bad references the valid ones; f_ext, direction, damping, the payload, the
workspace and the caller's out= array are checked the same way. Batched inputs (leading
dimension N) are valid and are tested with the batched algorithms; here only batches of
mismatched sizes appear.
"""
import re

import numpy as np
import pytest

import robot_dynamics as rd

MODEL = rd.load_urdf(rd.robot_urdf("panda"), tip="panda_hand")
OTHER = rd.load_urdf(rd.robot_urdf("ur5e"))     # 6 joints: its workspace is the wrong size
NV, FRAME = MODEL.nv, "panda_hand"
Q = np.array([0.1, -0.4, 0.2, -1.8, 0.3, 1.5, -0.6])  # away from singular poses
V, A = np.linspace(-0.3, 0.4, NV), np.linspace(0.5, -0.2, NV)
U = np.array([0.0, 0.6, 0.8])

# Every public function, its joint-space array arguments in order, and how to call it.
FUNCTIONS = {
    "rnea": ("q v a", lambda q, v, a, **kw: rd.rnea(MODEL, q, v, a, **kw)),
    "gravity": ("q", lambda q, **kw: rd.gravity(MODEL, q, **kw)),
    "nonlinear_effects": ("q v", lambda q, v, **kw: rd.nonlinear_effects(MODEL, q, v, **kw)),
    "mass_matrix": ("q", lambda q, **kw: rd.mass_matrix(MODEL, q, **kw)),
    "coriolis_matrix": ("q v", lambda q, v, **kw: rd.coriolis_matrix(MODEL, q, v, **kw)),
    "forward_dynamics": ("q v tau",
                         lambda q, v, tau, **kw: rd.forward_dynamics(MODEL, q, v, tau, **kw)),
    "frame_pose": ("q", lambda q, **kw: rd.frame_pose(MODEL, q, FRAME, **kw)),
    "frame_jacobian": ("q", lambda q, **kw: rd.frame_jacobian(MODEL, q, FRAME, **kw)),
    "frame_velocity": ("q v", lambda q, v, **kw: rd.frame_velocity(MODEL, q, v, FRAME, **kw)),
    "frame_bias_acceleration": (
        "q v", lambda q, v, **kw: rd.frame_bias_acceleration(MODEL, q, v, FRAME, **kw)),
    "task_space_inertia": ("q", lambda q, **kw: rd.task_space_inertia(MODEL, q, FRAME, **kw)),
    "inverse_task_space_inertia": (
        "q", lambda q, **kw: rd.inverse_task_space_inertia(MODEL, q, FRAME, **kw)),
    "translational_inertia": (
        "q", lambda q, **kw: rd.translational_inertia(MODEL, q, FRAME, **kw)),
    "effective_mass": ("q", lambda q, **kw: rd.effective_mass(MODEL, q, FRAME, U, **kw)),
}
GOOD = {"q": Q, "v": V, "a": A, "tau": A}

WRONG_SHAPES = {
    "short": np.zeros(NV - 1), "long": np.zeros(NV + 1), "empty": [], "scalar": 0.5,
    "column (nv, 2)": np.zeros((NV, 2)), "batch of wrong width": np.zeros((3, NV + 1)),
    "3-D": np.zeros((1, NV, 1)), "None": None,
}
WRONG_TYPES = {
    "string": "0.1 0.2", "numeric strings": ["0.1"] * NV, "complex": np.full(NV, 1 + 1j),
    "objects": [None] * NV, "dict": {"panda_joint1": 0.1},
}


def call(function, **changes):
    names, f = FUNCTIONS[function]
    keywords = {k: changes.pop(k) for k in ("data", "f_ext", "reference", "damping", "out")
                if k in changes}
    return f(*(changes.get(n, GOOD[n]) for n in names.split()), **keywords)


ARGUMENTS = [(f, name) for f, (names, _) in FUNCTIONS.items() for name in names.split()]


@pytest.mark.parametrize("function, argument", ARGUMENTS)
@pytest.mark.parametrize("value", WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_wrong_shape_names_the_argument_and_the_expected_shape(function, argument, value):
    with pytest.raises((ValueError, TypeError), match=rf"\b{argument}\b.*\({NV},\)"):
        call(function, **{argument: value})


@pytest.mark.parametrize("function, argument", ARGUMENTS)
@pytest.mark.parametrize("value", WRONG_TYPES.values(), ids=WRONG_TYPES)
def test_wrong_type_names_the_argument_and_the_expected_shape(function, argument, value):
    """Strings, complex numbers and objects are not joint values.

    numpy would cast them: a list of numeric strings, the real part of complex numbers, None
    as NaN.
    """
    with pytest.raises((ValueError, TypeError), match=rf"\b{argument}\b.*\({NV},\)"):
        call(function, **{argument: value})


@pytest.mark.parametrize("function, argument", ARGUMENTS)
def test_integers_are_accepted_as_numbers(function, argument):
    integers = np.array([1, -2, 0, -1, 2, 1, -1])
    expected = call(function, **{argument: integers.astype(float)})
    np.testing.assert_array_equal(call(function, **{argument: integers}), expected)
    np.testing.assert_array_equal(call(function, **{argument: integers.tolist()}), expected)


@pytest.mark.parametrize("function", ["rnea", "forward_dynamics", "frame_velocity",
                                      "coriolis_matrix"])
def test_batches_of_different_sizes_are_refused(function):
    with pytest.raises(ValueError, match=rf"\bv\b.*\(2, {NV}\)"):
        call(function, q=np.tile(Q, (2, 1)), v=np.tile(V, (3, 1)), a=np.tile(A, (2, 1)),
             tau=np.tile(A, (2, 1)))


@pytest.mark.parametrize("function", ["rnea", "forward_dynamics"])
@pytest.mark.parametrize("f_ext", [np.zeros((NV, 3)), np.zeros(6), np.zeros((NV + 1, 6)),
                                   np.zeros((6, NV)), "x", np.full((NV, 6), 1j)],
                         ids=["(nb, 3)", "(6,)", "(nb + 1, 6)", "(6, nb)", "string", "complex"])
def test_wrong_f_ext_names_the_expected_shape(function, f_ext):
    with pytest.raises((ValueError, TypeError), match=rf"f_ext.*\({NV}, 6\)"):
        call(function, f_ext=f_ext)


FRAMES = {
    "frame_pose": lambda frame: rd.frame_pose(MODEL, Q, frame),
    "frame_jacobian": lambda frame: rd.frame_jacobian(MODEL, Q, frame),
    "frame_velocity": lambda frame: rd.frame_velocity(MODEL, Q, V, frame),
    "frame_bias_acceleration": lambda frame: rd.frame_bias_acceleration(MODEL, Q, V, frame),
    "task_space_inertia": lambda frame: rd.task_space_inertia(MODEL, Q, frame),
    "inverse_task_space_inertia": lambda frame: rd.inverse_task_space_inertia(MODEL, Q, frame),
    "translational_inertia": lambda frame: rd.translational_inertia(MODEL, Q, frame),
    "effective_mass": lambda frame: rd.effective_mass(MODEL, Q, frame, U),
    "with_payload": lambda frame: rd.with_payload(MODEL, 1.0, frame=frame),
}


BAD_FRAMES = {"typo": "panda_hnad", "empty": "", "None": None, "int": 3, "list": ["panda_hand"]}


@pytest.mark.parametrize("function, frame", [
    pytest.param(f, frame, id=f"{name}-{f}") for f in FRAMES for name, frame in BAD_FRAMES.items()
    if not (f == "with_payload" and frame is None)])   # with_payload's frame=None: the tip
def test_unknown_frame_lists_the_known_frames(function, frame):
    with pytest.raises((KeyError, TypeError), match=r"panda_link0.*panda_hand"):
        FRAMES[function](frame)


REFERENCES = {
    "frame_jacobian": lambda r: rd.frame_jacobian(MODEL, Q, FRAME, r),
    "frame_velocity": lambda r: rd.frame_velocity(MODEL, Q, V, FRAME, r),
    "frame_bias_acceleration": lambda r: rd.frame_bias_acceleration(MODEL, Q, V, FRAME, r),
    "task_space_inertia": lambda r: rd.task_space_inertia(MODEL, Q, FRAME, r),
    "inverse_task_space_inertia": lambda r: rd.inverse_task_space_inertia(MODEL, Q, FRAME, r),
}


@pytest.mark.parametrize("function", REFERENCES)
@pytest.mark.parametrize("reference", [7, -1, 1.5, None, "local_world", rd.Reference],
                         ids=["7", "-1", "1.5", "None", "typo", "the enum class"])
def test_bad_reference_lists_the_valid_ones(function, reference):
    """frame_bias_acceleration used to compute the WORLD one for any unknown value."""
    with pytest.raises(ValueError, match=r"LOCAL\b.*LOCAL_WORLD_ALIGNED.*WORLD"):
        REFERENCES[function](reference)


@pytest.mark.parametrize("direction", [[0, 0, 0], [1, 0], [1, 0, 0, 0], [np.nan, 0, 0],
                                       [np.inf, 0, 0], "x", None],
                         ids=["zero", "(2,)", "(4,)", "nan", "inf", "string", "None"])
def test_effective_mass_needs_a_finite_nonzero_3d_direction(direction):
    """(2,) and None were numpy's 'cannot reshape'; inf gave NaN."""
    with pytest.raises((ValueError, TypeError), match=r"direction.*3"):
        rd.effective_mass(MODEL, Q, FRAME, direction)


@pytest.mark.parametrize("function", [rd.task_space_inertia, rd.translational_inertia])
@pytest.mark.parametrize("damping", [-1.0, np.nan, np.inf, "x", [1.0, 2.0]],
                         ids=["negative", "nan", "inf", "string", "list"])
def test_damping_must_be_a_finite_nonnegative_number(function, damping):
    """Negative or NaN damping was reported as a singular pose; infinite damping gave Λ = 0."""
    with pytest.raises((ValueError, TypeError), match=r"damping must be"):
        function(MODEL, Q, FRAME, damping=damping)


@pytest.mark.parametrize("arguments, pattern", [
    (dict(mass=-1.0), r"mass"), (dict(mass=np.nan), r"mass"), (dict(mass="x"), r"mass"),
    (dict(mass=1.0, com=[0.0, 0.1]), r"com.*3"), (dict(mass=1.0, com="x"), r"com.*3"),
    (dict(mass=1.0, inertia=np.eye(2)), r"inertia.*3x3"),
    (dict(mass=1.0, inertia=[[1, 1, 0], [0, 1, 0], [0, 0, 1]]), r"inertia.*symmetric"),
    (dict(mass=1.0, inertia=-np.eye(3)), r"inertia.*positive"),
], ids=["negative mass", "nan mass", "string mass", "com (2,)", "string com",
        "inertia 2x2", "asymmetric inertia", "negative inertia"])
def test_bad_payload_names_what_is_wrong(arguments, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        rd.with_payload(MODEL, frame=FRAME, **arguments)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_workspace_of_another_model_is_refused(function):
    """A smaller workspace would be written past its end (no bounds checks in the kernels)."""
    with pytest.raises(ValueError, match=r"(?i)data.*another model"):
        call(function, data=rd.Data(OTHER))


@pytest.mark.parametrize("function", ["rnea", "mass_matrix", "frame_jacobian"])
def test_workspace_of_the_wrong_type_is_a_type_error(function):
    with pytest.raises(TypeError, match=r"Data"):
        call(function, data=np.zeros((NV, 10)))


OUT_FUNCTIONS = {"rnea": (NV,), "gravity": (NV,), "nonlinear_effects": (NV,),
                 "mass_matrix": (NV, NV), "frame_jacobian": (6, NV)}
READ_ONLY = np.zeros(NV)
READ_ONLY.flags.writeable = False
WRONG_OUT = {"short": np.zeros(NV - 1), "batch shape": np.zeros((1, NV)),
             "transposed": np.zeros((NV, 6)), "integers": np.zeros(NV, dtype=int),
             "float32": np.zeros(NV, dtype=np.float32), "read-only": READ_ONLY,
             "list": [0.0] * NV}


@pytest.mark.parametrize("function", OUT_FUNCTIONS)
@pytest.mark.parametrize("out", WRONG_OUT.values(), ids=WRONG_OUT)
def test_wrong_out_names_the_expected_array(function, out):
    shape = OUT_FUNCTIONS[function]
    before = np.array(out, copy=True)
    with pytest.raises(ValueError, match=rf"out must be a writeable float64 array of shape "
                                         rf"{re.escape(str(shape))}"):
        call(function, out=out)
    assert np.array_equal(np.asarray(out), before)   # left as it was


@pytest.mark.parametrize("function", OUT_FUNCTIONS)
def test_bad_state_with_out_leaves_out_alone(function):
    out = np.full(OUT_FUNCTIONS[function], 7.0)
    with pytest.raises(ValueError, match=r"\bq\b.*\(7,\)"):
        call(function, q=np.zeros(NV + 1), out=out)
    assert np.all(out == 7.0)
