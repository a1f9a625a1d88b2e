-- group_totals_with(threshold := 0.5): one row per group, the sums every other signal is built from
-- (one pass over the scored trajectories; task_steps and group_outcomes read this).
--   group_id    the group (the rollouts of one task generated together at one step)
--   task_id     its task
--   step        the step that generated it
--   rollouts    rollouts in the group
--   successes   rollouts that succeeded (success as recorded, else reward >= threshold)
--   reward_sum  sum of their rewards
-- requires: scored_trajectories
CREATE OR REPLACE MACRO group_totals_with(threshold := 0.5) AS TABLE
SELECT
    group_id,
    min(task_id) AS task_id,
    min(step) AS step,
    count(*) AS rollouts,
    count(*) FILTER (WHERE coalesce(success, reward >= threshold)) AS successes,
    sum(reward) AS reward_sum
FROM scored_trajectories
GROUP BY group_id;
