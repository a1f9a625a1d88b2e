"""Rolling an agent out on the store's tasks, each finished group written as it finishes."""
