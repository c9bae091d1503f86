"""Column layout of the kernels' arrays: the packed model table, the frame table, the workspace.

The kernels are compiled with these numbers frozen in, so numba's cache is keyed on this file
(``_jit.SOURCES``), not on model.py.
"""

REVOLUTE, PRISMATIC = 0, 1

# Columns of the model table the kernels read, one row per body (Model.table; like Model.frames
# a private copy that nothing writes, left writable for numba's fast argument path). The kernels'
# body frame is the model's turned by a constant R_a so that the joint axis is its z axis: joints
# are Rz or Pz, as in Featherstone's spatial_v2, which makes exp([A_i] q_i) a plane rotation.
BODY_PARENT, BODY_TYPE = 0, 1  # parent body (-1: the base) and joint type, as floats
BODY_ROT, BODY_POS = 2, 11     # X_tree: kernel body frame at q = 0 in the parent's (R row-major, p)
BODY_INERTIA = 14              # standard parameters (spatial.py) about the origin, kernel axes
BODY_GRAVITY = 24              # model.gravity, the same on every row
BODY_AXES = 27                 # R_a: the kernel frame's axes in the model's body frame
BODY_ARMATURE = 36             # the body's joint: armature I_a (rotor inertia), added to M_ii
BODY_VISCOUS, BODY_COULOMB = 37, 38   # its friction f_v q̇ + [f_c + f_s e^{-(q̇/v_s)²}] sgn_ε q̇
BODY_COULOMB_VELOCITY = 39     # ε of that smooth sign, model.coulomb_velocity on every row
BODY_STICTION, BODY_STRIBECK_VELOCITY = 40, 41   # f_s and v_s of the Stribeck term
BODY_WIDTH = 42
# Columns of the frame table (Model.frames), one row per named frame.
FRAME_BODY, FRAME_ROT, FRAME_POS, FRAME_WIDTH = 0, 1, 10, 13  # placement in the kernel body frame

# Columns of the workspace (Data.ws), one row per body; which kernel fills which is noted.
WS_R, WS_P = 0, 9              # forward_kinematics: body pose in the base frame
WS_S = 12                      # forward_kinematics: joint screw S_i in base coordinates (6)
WS_RREL, WS_PREL = 18, 27      # forward_pass: body pose in the parent's frame at q
WS_V, WS_A = 30, 36            # forward_pass: body twist and acceleration, body frame (6 each)
WS_F = 42                      # rnea: body wrench, body frame (6)
WS_IC = 48                     # crba: composite inertia of the subtree, body frame (10)
WS_HM = 58                     # gravity_state: the subtree's first moment and mass, base (4)
WS_IB = 62                     # coriolis: composite inertia of the subtree, base coordinates (10)
WS_VW, WS_SD = 72, 78          # coriolis: base-coordinate twist and screw derivative (6 each)
WS_BC = 84                     # coriolis: composite Coriolis term B of the subtree (6x6, by rows)
WS_Y = 120                     # task_space: row i of Y = L^-1 J^T (6)
WS_M = 126                     # forward_dynamics, task_space: M and its Cholesky factor (nb)
