"""What the three nodes share.

The node shell, parameters and their schema, joint-state reading and writing, diagnostics,
actuator profiles, and the features the controller and the estimator both run (payload,
contact safety).
"""
