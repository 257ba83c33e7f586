"""Experiment suites, one TOML file per experiment, installed with the package as
``blowfish_te.suites`` (see :mod:`blowfish_te.evaluation.suite` for the format)."""
