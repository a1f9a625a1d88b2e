"""The calc environment: procedurally generated register-machine tool tasks for tiny CPU policies.

Registered as ``"calc"`` in ``coevolve_engine.adapters.environments.ENVIRONMENTS``; its offline synthesizer is
``"offline:calc"``. Needs nothing beyond the engine itself.
"""

from coevolve_engine.adapters.environments.calc.environment import TOOL_SCHEMAS, CalcEnvironment
from coevolve_engine.adapters.environments.calc.tasks import FULL_SPACE, SEED_SPACE, SkillSpace, skill_of

__all__ = ["CalcEnvironment", "FULL_SPACE", "SEED_SPACE", "SkillSpace", "TOOL_SCHEMAS", "skill_of"]
