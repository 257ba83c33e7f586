"""Settings, environment and markers for the whole suite; the oracles are in
:mod:`blowfish_te.testing`, the shared strategies and test doubles in ``tests/helpers.py``."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

# optimised strategies computed by the tests go to a folder of their own, never the user's cache
# (child processes inherit it); the shipped strategies are read as in any install
_STRATEGY_CACHE = tempfile.mkdtemp(prefix="blowfish_te_test_strategies_")
os.environ["BLOWFISH_TE_CACHE_DIR"] = _STRATEGY_CACHE
atexit.register(shutil.rmtree, _STRATEGY_CACHE, ignore_errors=True)

settings.register_profile(
    "default", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")
