"""Adapters: environments the agent acts in, agents that act, importers of foreign data."""
