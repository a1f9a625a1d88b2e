-- task_steps_with(threshold := 0.5): one row per (task_id, step) at which the task was attempted.
--   task_id    the task
--   step       the training step
--   rollouts   rollouts of the task at that step
--   successes  rollouts that succeeded (success as recorded, else reward >= threshold)
--   score      the task's score at the step: the mean reward of those rollouts, rounded to 9 decimals so
--              that a tie at the threshold is a tie whatever order the rewards were summed in
-- requires: scored_trajectories
CREATE OR REPLACE MACRO task_steps_with(threshold := 0.5) AS TABLE
SELECT
    task_id,
    step,
    count(*) AS rollouts,
    count(*) FILTER (WHERE coalesce(success, reward >= threshold)) AS successes,
    round(avg(reward), 9) AS score
FROM scored_trajectories
GROUP BY task_id, step;
