"""Held-out evaluation: a policy checkpoint played on the store's eval tasks, and the results stored per task."""
