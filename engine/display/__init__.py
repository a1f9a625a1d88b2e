"""What the engine shows: progress while a long command works, and the loop's cost, one definition each."""
