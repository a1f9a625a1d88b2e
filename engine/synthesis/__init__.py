"""Synthesis: from failure patterns to new candidate tasks.

Each phase reads the store and writes its results back to it: ``summaries`` asks an LLM for one summary per
failure pattern (``failure_patterns.summary``); the modules next to it turn patterns into candidate tasks and
validate them (table ``candidates``).
"""
