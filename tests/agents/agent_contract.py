"""The suite every agent implementation must pass (fsspec style: subclass it, provide ``agent``).

class TestMyAgentContract(AgentContract):
    @pytest.fixture
    def agent(self):
        return MyAgent(...)
"""

from __future__ import annotations

import pytest
from toy_env import CounterEnvironment, counter_task

from coevolve_engine.adapters.agents import STOPS, Agent, Rollout

RECORD_KEYS = {"task_id", "step", "group_id", "reward", "success", "actions", "messages", "policy", "error", "meta"}


class AgentContract:
    @pytest.fixture
    def agent(self) -> Agent:  # pragma: no cover - provided by each implementation's test
        raise NotImplementedError

    def test_is_an_agent_with_a_policy_name(self, agent):
        assert isinstance(agent, Agent)
        assert isinstance(agent.policy, str) and agent.policy

    def test_plays_an_episode_to_a_recorded_result(self, agent):
        env = CounterEnvironment()
        task = counter_task("c-1", ["Add 2 to the counter.", "Now add 3."], target=5)
        rollout = agent.run(env, task["task_id"], task["spec"])
        assert isinstance(rollout, Rollout)
        assert rollout.error is None, rollout.error
        assert rollout.stop in STOPS
        assert rollout.task_id == "c-1"
        assert 0.0 <= rollout.reward <= 1.0
        assert [m["role"] for m in rollout.messages[:2]] == ["system", "user"]
        assert any(m["role"] == "assistant" for m in rollout.messages)
        assert rollout.usage.llm_calls >= 1
        assert rollout.usage.prompt_tokens > 0
        assert env.episodes[0].closed
        record = rollout.to_record(step=3, group_id="g")
        assert set(record) == RECORD_KEYS
        assert record["step"] == 3 and record["group_id"] == "g" and record["policy"] == agent.policy

    def test_a_task_that_cannot_start_is_a_rollout_with_an_error(self, agent):
        rollout = agent.run(CounterEnvironment(), "bad", {"turns": []})
        assert rollout.stop == "error" and rollout.reward == 0.0 and not rollout.success
        assert "SpecError" in rollout.error and "'turns' must be a non-empty list" in rollout.error

    def test_an_environment_that_raises_ends_only_that_rollout(self, agent):
        env = CounterEnvironment()
        task = counter_task("c-2", ["Add 2 to the counter."], target=2, fail_in="score")
        rollout = agent.run(env, task["task_id"], task["spec"])
        assert rollout.stop == "error" and rollout.reward == 0.0
        assert rollout.error == "environment score() raised RuntimeError: toy environment broke in score"
        assert env.episodes[0].closed
