"""The models the engine calls for its own work: LLMs (summaries, exploration, judging) and sentence embeddings."""
