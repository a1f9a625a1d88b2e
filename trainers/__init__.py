"""Trainers: the contract between the engine and whatever trains the policy."""
