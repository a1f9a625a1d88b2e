-- rare_trajectories_with(theta := 5, min_n := 50): one row per trajectory whose action pattern was rare at
-- its own step (see pattern_steps_with). flagged_trajectories and task_signals read this.
--   trajectory_id   the trajectory
--   task_id         its task
--   step            its step
--   group_id        its group
--   action_pattern  its (rare) action pattern
-- requires: scored_trajectories, pattern_steps_with
CREATE OR REPLACE MACRO rare_trajectories_with(theta := 5, min_n := 50) AS TABLE
SELECT t.trajectory_id, t.task_id, t.step, t.group_id, t.action_pattern
FROM scored_trajectories AS t
JOIN (SELECT action_pattern, step FROM pattern_steps_with(theta := theta, min_n := min_n) WHERE rare) AS r
  ON r.action_pattern = t.action_pattern AND r.step = t.step;
