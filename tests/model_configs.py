"""Small hyperparameters of every registered model, for the suite-wide tests (saving, cross-backend).

Every registered model must have an entry (tests/registry_test.py checks it). The schema is
`tests.testing.small_simulator().schema` unless the entry says otherwise.
"""

SMALL = {
    "din": {"attention_units": (8,), "mlp_units": (16,)},
}
