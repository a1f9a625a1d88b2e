"""Bundled sample data (tasks and trajectories) for the README's first command and the tests."""
