"""The models a run calls, one place for each (the [models] table): the explorer, the abstraction model, the
pattern summaries' model, the judge and validation's agent, each with its endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass

from coevolve_engine.core.endpoint import Endpoint
from coevolve_engine.core.errors import ConfigError
from coevolve_engine.core.settings import setting


@dataclass
class ModelEndpoint:
    """One model the run calls and where it is served: a litellm model string and its OpenAI-compatible
    endpoint. The key is read from an environment variable, so it is never written in a config or the store."""

    model: str = setting("", "The model (litellm string, e.g. openai/qwen3-max or hosted_vllm/Qwen/Qwen3-32B); "
                             "empty: see the role.")
    api_base: str = setting("", "Base URL of its OpenAI-compatible server; empty: the provider's default.")
    api_key_env: str = setting("", "The environment variable that holds its key (e.g. DASHSCOPE_API_KEY); empty: "
                                   "the provider's usual one (OPENAI_API_KEY for openai/...).")

    def api_key(self, key: str) -> str | None:
        """The key from ``api_key_env`` (None when unset); ConfigError naming ``key`` when the variable is
        missing."""
        if not self.api_key_env:
            return None
        if self.api_key_env not in os.environ:
            raise ConfigError(f"{key}.api_key_env: the environment variable {self.api_key_env} is not set "
                              f"(export it with the key of {self.api_base or self.model})")
        return os.environ[self.api_key_env]

    def connect(self, key: str) -> Endpoint | None:
        """The endpoint the run's calls go to (None when no model is set), its key read from ``api_key_env``;
        ConfigError naming ``key`` when that variable is missing."""
        if not self.model:
            return None
        return Endpoint(self.model, self.api_base or None, self.api_key(key))


#: the models a run calls, each a [models] role
MODEL_ROLES = ("explorer", "abstraction", "summary", "judge", "agent")


@dataclass
class ModelsConfig:
    """Every model the run calls, one place for each: bootstrap, synthesis and validation read them here."""

    explorer: ModelEndpoint = setting(ModelEndpoint, "The model that acts in the environment: D_0's unguided "
                                                     "exploration (bootstrap) and each round's exploration (llm, "
                                                     "llm-unguided); empty: the abstraction model.")
    abstraction: ModelEndpoint = setting(ModelEndpoint, "The model that turns each exploration into tasks; "
                                                        "empty: the explorer.")
    summary: ModelEndpoint = setting(ModelEndpoint, "llm: summarise each failure pattern with this model first; "
                                                    "the summary guides the exploration; empty: no summaries.")
    judge: ModelEndpoint = setting(ModelEndpoint, "Validation asks this model last to rule on each task with a "
                                                  "strict rubric; empty: no judge.")
    agent: ModelEndpoint = setting(ModelEndpoint, "Validation rolls this agent out validation.attempts times on each "
                                                  "candidate (a litellm string, or a local model directory, "
                                                  "sampling as [agent] says); empty: no agent attempt.")

    def endpoint(self, role: str) -> ModelEndpoint:
        """The role's endpoint as the run calls it: an explorer or abstraction left empty is the other one."""
        chosen = getattr(self, role)
        if not chosen.model and role in ("explorer", "abstraction"):
            return self.abstraction if role == "explorer" else self.explorer
        return chosen

    def connect(self, role: str) -> Endpoint | None:
        """The role's endpoint as its calls reach it, key included (None: the role has no model)."""
        return self.endpoint(role).connect(f"models.{role}")

    def exploration(self) -> dict[str, Endpoint | None]:
        """The abstraction model (``model``) and the explorer (``explorer``), as the bootstrap and the exploring
        synthesizers take them."""
        return {"model": self.connect("abstraction"), "explorer": self.connect("explorer")}
