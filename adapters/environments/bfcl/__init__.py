"""The BFCL environment (Berkeley Function Calling Leaderboard, from the ``bfcl-eval`` package), offline.

Registered as ``"bfcl"`` in ``coevolve_engine.adapters.environments.ENVIRONMENTS``. Importing this package
fails with an install hint when bfcl-eval is missing, but does not import bfcl_eval itself; that happens when
tasks are loaded or episodes started.
"""

from coevolve_engine.adapters.environments.bfcl.environment import BFCLEnvironment
from coevolve_engine.adapters.environments.bfcl.shipped import (
    CATEGORIES,
    MULTI_TURN_CATEGORIES,
    SINGLE_TURN_CATEGORIES,
)

__all__ = ["BFCLEnvironment", "CATEGORIES", "MULTI_TURN_CATEGORIES", "SINGLE_TURN_CATEGORIES"]
