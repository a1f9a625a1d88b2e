"""coevolve-engine: LLM agents and their training tasks evolving together, around one DuckDB store."""

__version__ = "0.1.0"
