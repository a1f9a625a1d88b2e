"""A user's SQL against the store (`coevolve-engine query`): the allow-list of statements, and the run."""
