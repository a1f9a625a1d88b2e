"""The signals' readable summary and the snapshot that computes every signal at one parameter set."""
