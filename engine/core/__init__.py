"""The core types every layer shares: the rollout record, the environment contract, the store contract
(trajectory sinks), the candidate-task contract and the ids computed over JSON.

Everything in ``coevolve_engine.core`` imports only the standard library, third-party packages and other core
modules (``errors``, ``registry``, ``store`` and their helpers), so ``engine/``, ``adapters/`` and
``trainers/`` can all import it without a cycle; ``tests/test_layers.py`` keeps it so.
"""

#: how long a store open waits for another process's write to finish before giving up, in seconds
DEFAULT_WAIT_SECONDS = 30.0
