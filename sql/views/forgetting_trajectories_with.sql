-- forgetting_trajectories_with(w := 3, threshold := 0.5): one row per trajectory where forgetting fires in its
-- per-trajectory form, as the paper states it: the trajectory failed (success as recorded, else
-- reward < threshold) while one of its task's w most recent earlier scores (the task's scores at earlier steps,
-- not counting this step) was >= threshold. The group form (forgetting_with) compares the step's mean score
-- instead; with groups of 8 it fires far more rarely.
--   trajectory_id  the trajectory
--   task_id        its task
--   step           its step
--   group_id       its group
--   reward         its reward (it failed)
--   recent_best    the best of its task's (up to) w most recent earlier scores
--   window_scores  how many earlier scores the window held (fewer than w early in a task's history)
--   w              the window used
--   threshold      the threshold used
-- requires: scored_trajectories, task_history_with
CREATE OR REPLACE MACRO forgetting_trajectories_with(w := 3, threshold := 0.5) AS TABLE
SELECT t.trajectory_id, t.task_id, t.step, t.group_id, t.reward, h.recent_best, h.window_scores,
       CAST(w AS INTEGER) AS w, CAST(threshold AS DOUBLE) AS threshold
FROM scored_trajectories AS t
JOIN task_history_with(w := w, threshold := threshold) AS h ON h.task_id = t.task_id AND h.step = t.step
WHERE h.recent_best >= threshold AND NOT coalesce(t.success, t.reward >= threshold);
