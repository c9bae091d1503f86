"""The test-only control_msgs (test/interfaces) is control_msgs' documented interface.

Its fields are written from control_msgs' documentation (Jazzy: control_msgs 5.x; Kilted: 6.x,
whose FollowJointTrajectory feedback adds the index of the trajectory point being executed), and
its RIHS01 type hashes are those of a colcon build of the real control_msgs for Jazzy published
in a public workspace: a client or server built against the real package talks to ours.
"""
import importlib
import json
import os

from conftest import ros_distro

# RIHS01 hashes generated from the real control_msgs 5.x (Jazzy). Goal, result and tolerances
# are the same in 6.x (Kilted); the feedback differs by its two index fields.
PUBLISHED = {
    'action/FollowJointTrajectory':
        '738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6',
    'action/FollowJointTrajectory_Goal':
        '8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205',
    'action/FollowJointTrajectory_Result':
        '8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220',
    'action/FollowJointTrajectory_Feedback':
        '3fd0aaecf71725121ae1ff7f01098a5e0da581e672be18a6b2c286cb43d96b49',
    'action/FollowJointTrajectory_SendGoal':
        'b13789dddc325a7a962825c45e28c77d37237ec129dd0c34dc5994562938c57f',
    'action/FollowJointTrajectory_FeedbackMessage':
        '80398fcb9674a79081a9906e2ccf0c804dd7cb15e22e362e606ee87186beab71',
    'msg/JointTolerance':
        'c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648',
    'msg/JointComponentTolerance':
        '739ea7566931944d33830fa10f1bf5e7a7fbdc3172bce7a7eaac642bd6e3ffa4',
}
SAME_IN_BOTH = ('action/FollowJointTrajectory_Goal', 'action/FollowJointTrajectory_Result',
                'msg/JointTolerance', 'msg/JointComponentTolerance')

POINT = 'trajectory_msgs/JointTrajectoryPoint'
MULTI_POINT = 'trajectory_msgs/MultiDOFJointTrajectoryPoint'
# Field name -> type, in order, as control_msgs documents them.
TOLERANCE = [('name', 'string'), ('position', 'double'), ('velocity', 'double'),
             ('acceleration', 'double')]
COMPONENT_TOLERANCE = [('joint_name', 'string'), ('component', 'uint16'),
                       ('position', 'double'), ('velocity', 'double'),
                       ('acceleration', 'double')]
GOAL = [('trajectory', 'trajectory_msgs/JointTrajectory'),
        ('multi_dof_trajectory', 'trajectory_msgs/MultiDOFJointTrajectory'),
        ('path_tolerance', 'sequence<control_msgs/JointTolerance>'),
        ('component_path_tolerance', 'sequence<control_msgs/JointComponentTolerance>'),
        ('goal_tolerance', 'sequence<control_msgs/JointTolerance>'),
        ('component_goal_tolerance', 'sequence<control_msgs/JointComponentTolerance>'),
        ('goal_time_tolerance', 'builtin_interfaces/Duration')]
RESULT = [('error_code', 'int32'), ('error_string', 'string')]
RESULT_CODES = {'SUCCESSFUL': 0, 'INVALID_GOAL': -1, 'INVALID_JOINTS': -2,
                'OLD_HEADER_TIMESTAMP': -3, 'PATH_TOLERANCE_VIOLATED': -4,
                'GOAL_TOLERANCE_VIOLATED': -5}
COMPONENTS = {'X_AXIS': 1, 'Y_AXIS': 2, 'Z_AXIS': 3, 'TRANSLATION': 4, 'ROTATION': 5}
STATE = [('header', 'std_msgs/Header'), ('joint_names', 'sequence<string>'),
         ('reference', POINT), ('feedback', POINT), ('error', POINT), ('output', POINT),
         ('multi_dof_joint_names', 'sequence<string>'),
         ('multi_dof_reference', MULTI_POINT), ('multi_dof_feedback', MULTI_POINT),
         ('multi_dof_error', MULTI_POINT), ('multi_dof_output', MULTI_POINT),
         ('speed_scaling_factor', 'double')]


def feedback_fields(distro):
    """FollowJointTrajectory feedback's fields; Kilted's control_msgs 6.x adds the indices."""
    index = [('index', 'int32')] if distro == 'kilted' else []
    multi_index = [('multi_dof_index', 'int32')] if distro == 'kilted' else []
    return ([('header', 'std_msgs/Header'), ('joint_names', 'sequence<string>'),
             ('desired', POINT), ('actual', POINT), ('error', POINT)] + index
            + [('multi_dof_joint_names', 'sequence<string>'), ('multi_dof_desired', MULTI_POINT),
               ('multi_dof_actual', MULTI_POINT), ('multi_dof_error', MULTI_POINT)]
            + multi_index)


def fields(cls):
    return list(cls.get_fields_and_field_types().items())


def test_fields_and_constants_as_documented(control_msgs_prefix):
    msg = importlib.import_module('control_msgs.msg')
    action = importlib.import_module('control_msgs.action').FollowJointTrajectory
    assert fields(msg.JointTolerance) == TOLERANCE
    assert fields(msg.JointComponentTolerance) == COMPONENT_TOLERANCE
    assert {name: getattr(msg.JointComponentTolerance, name) for name in COMPONENTS} \
        == COMPONENTS
    assert fields(msg.JointTrajectoryControllerState) == STATE
    assert fields(action.Goal) == GOAL
    assert fields(action.Result) == RESULT
    assert {name: getattr(action.Result, name) for name in RESULT_CODES} == RESULT_CODES
    assert fields(action.Feedback) == feedback_fields(ros_distro())


def built_hashes(prefix, interface):
    """{type: RIHS01 hex} of the type description the build generated for `interface`."""
    path = os.path.join(prefix, 'share', 'control_msgs', interface + '.json')
    with open(path) as f:
        description = json.load(f)
    return {entry['type_name']: entry['hash_string'].removeprefix('RIHS01_')
            for entry in description['type_hashes']}


def test_type_hashes_match_the_real_package(control_msgs_prefix):
    hashes = built_hashes(control_msgs_prefix, 'action/FollowJointTrajectory')
    for interface in ('msg/JointTolerance', 'msg/JointComponentTolerance'):
        hashes.update(built_hashes(control_msgs_prefix, interface))
    checked = PUBLISHED if ros_distro() == 'jazzy' else SAME_IN_BOTH
    for name in checked:
        assert hashes['control_msgs/' + name] == PUBLISHED[name], name
    if ros_distro() != 'jazzy':   # the indices change the feedback's hash
        feedback = 'control_msgs/action/FollowJointTrajectory_Feedback'
        assert hashes[feedback] != PUBLISHED['action/FollowJointTrajectory_Feedback']
