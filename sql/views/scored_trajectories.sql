-- scored_trajectories: one row per trajectory that ran to its verdict (error IS NULL) and was played by the
-- policy, not by the reference agent (policy 'reference': `coevolve-engine rollout --model reference`, the
-- ground truth replayed as demonstrations for a warm-up); every signal is computed over these. Rollouts cut
-- short by a fault outside the agent (server error, timeout) say nothing about the agent, and the reference
-- agent's say nothing about the policy (its successes would make every later failure of the task look like
-- forgetting), so they flag nothing. Columns: those of trajectories.
-- requires: (none)
CREATE OR REPLACE VIEW scored_trajectories AS
SELECT * FROM trajectories WHERE error IS NULL AND policy IS DISTINCT FROM 'reference';
