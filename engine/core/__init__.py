"""The bottom layer every other layer shares: the core types (the rollout record, the environment contract, the
trajectory sinks, the candidate-task contract, the ids computed over JSON) and the store with what it runs on
(``store``, ``ingest`` and its sources, ``records``, ``registry``, ``errors``, ``sqlfiles``, ``outputs``,
``lease``).

Everything in ``coevolve_engine.core`` imports only the standard library, third-party packages and other core
modules, so ``engine/``, ``adapters/`` and ``trainers/`` can all import it without a cycle;
``tests/test_layers.py`` keeps it so.
"""

#: how long a store open waits for another process's write to finish before giving up, in seconds
DEFAULT_WAIT_SECONDS = 30.0
