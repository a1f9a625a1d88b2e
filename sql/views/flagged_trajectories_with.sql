-- flagged_trajectories_with(threshold := 0.5, w := 3, theta := 5, min_n := 50): one row per
-- (trajectory_id, signal); a trajectory carrying several signals has one row for each.
--   trajectory_id  the trajectory
--   task_id        its task
--   step           its step
--   group_id       its group
--   signal         'forgetting' (its task forgot at its step), 'boundary' (its group has mixed outcomes)
--                  or 'rare' (its action pattern was rare at its step)
-- requires: scored_trajectories, forgetting_with, boundary_with, pattern_steps_with
CREATE OR REPLACE MACRO flagged_trajectories_with(threshold := 0.5, w := 3, theta := 5, min_n := 50) AS TABLE
SELECT t.trajectory_id, t.task_id, t.step, t.group_id, 'forgetting' AS signal
FROM scored_trajectories AS t
JOIN forgetting_with(w := w, threshold := threshold) AS f
  ON f.task_id = t.task_id AND f.step = t.step
UNION ALL
SELECT t.trajectory_id, t.task_id, t.step, t.group_id, 'boundary' AS signal
FROM scored_trajectories AS t
JOIN boundary_with(threshold := threshold) AS b
  ON b.group_id = t.group_id
UNION ALL
SELECT t.trajectory_id, t.task_id, t.step, t.group_id, 'rare' AS signal
FROM scored_trajectories AS t
JOIN (SELECT action_pattern, step FROM pattern_steps_with(theta := theta, min_n := min_n) WHERE rare) AS r
  ON r.action_pattern = t.action_pattern AND r.step = t.step;
