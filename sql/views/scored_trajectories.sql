-- scored_trajectories: one row per trajectory that ran to its verdict (error IS NULL); every signal is
-- computed over these. Rollouts cut short by a fault outside the agent (server error, timeout) say nothing
-- about the agent, so they flag nothing. Columns: those of trajectories.
-- requires: (none)
CREATE OR REPLACE VIEW scored_trajectories AS SELECT * FROM trajectories WHERE error IS NULL;
