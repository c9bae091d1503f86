"""A bring-up's launch arguments apply only when given: a value in the YAML is never replaced.

``mode`` was a launch argument with a default, so the simulated_arm bring-up always set the
controller's mode, over a ``mode:`` in the user's parameter file (typo or not) without a word.
"""
import yaml

from robot_dynamics import bringup


def controller(specs):
    return next(spec for spec in specs if spec.name == 'dynamics_controller')


def user_config(tmp_path, mode):
    config = yaml.safe_load(open(bringup.config_file('panda.yaml')))
    config['/**/dynamics_controller']['ros__parameters']['mode'] = mode
    path = tmp_path / 'mine.yaml'
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_yaml_mode_is_kept_when_the_argument_is_not_given(tmp_path):
    config = user_config(tmp_path, 'computed_torque')
    spec = controller(bringup.nodes('simulated_arm', config=config))
    assert 'mode' not in spec.parameters   # the file's mode stands (its parameters come after)
    file = yaml.safe_load(open(spec.params_file))
    assert file['/**/dynamics_controller']['ros__parameters']['mode'] == 'computed_torque'


def test_a_given_mode_argument_wins(tmp_path):
    config = user_config(tmp_path, 'computed_torque')
    spec = controller(bringup.nodes('simulated_arm', config=config, mode='gravity_compensation'))
    assert spec.parameters['mode'] == 'gravity_compensation'


def test_a_mistyped_yaml_mode_reaches_the_node_which_refuses_it(tmp_path):
    """Not replaced by a default: the controller's schema (one_of) refuses it by name."""
    from robot_dynamics.nodes.common.schema import check, load
    from robot_dynamics.nodes.common.parameters import ConfigError
    config = user_config(tmp_path, 'computed_torqe')
    spec = controller(bringup.nodes('simulated_arm', config=config))
    assert 'mode' not in spec.parameters
    params = load('dynamics_controller')
    values = {p.name: p.default for p in params}
    values['mode'] = 'computed_torqe'
    try:
        check(params, values)
    except ConfigError as error:
        assert 'computed_torqe' in str(error) and 'computed_torque' in str(error), error
    else:
        raise AssertionError('a mistyped mode was accepted')
