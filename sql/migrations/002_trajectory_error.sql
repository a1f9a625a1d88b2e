-- 002_trajectory_error: a rollout cut short by a fault outside the agent keeps its record but no verdict.
--
-- trajectories.error  why the rollout could not be completed (the model server failed or timed out, the
--                     environment raised); NULL for every rollout that ran to its verdict. Such rollouts are
--                     kept for inspection, and the signal views leave them out (see views/scored_trajectories.sql).
ALTER TABLE trajectories ADD COLUMN error VARCHAR;
