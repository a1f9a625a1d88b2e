"""The agent registry and the package's import cost."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coevolve_engine.adapters.agents import AGENTS
from coevolve_engine.core.registry import RegistryError


def test_builtins_are_registered_and_load():
    assert {"litellm", "local"} <= set(AGENTS.names())
    assert AGENTS.load("litellm").__name__ == "LiteLLMAgent"
    assert AGENTS.load("local").__name__ == "LocalAgent"
    assert AGENTS.entries["litellm"].install_hint == 'pip install "coevolve-engine[agents]"'


def test_unknown_agent_lists_the_known_ones():
    with pytest.raises(RegistryError, match="unknown agent 'nope'; known: .*litellm, local"):
        AGENTS.load("nope")


def test_importing_the_agents_loads_neither_litellm_nor_torch():
    code = (
        "import sys, coevolve_engine.adapters.agents as a; a.AGENTS.load('litellm'); a.AGENTS.load('local');"
        "print(sorted(m for m in ('litellm', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
