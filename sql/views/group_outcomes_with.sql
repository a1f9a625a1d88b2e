-- group_outcomes_with(threshold := 0.5): one row per group (the rollouts of a task generated together).
--   group_id     the group
--   task_id      its task
--   step         the step that generated it
--   rollouts     rollouts in the group
--   successes    rollouts that succeeded (success as recorded, else reward >= threshold)
--   p            group success rate, successes / rollouts
--   variance     Bernoulli variance p * (1 - p)
--   mean_reward  mean reward of the group, rounded to 9 decimals
-- requires: group_totals_with
CREATE OR REPLACE MACRO group_outcomes_with(threshold := 0.5) AS TABLE
SELECT
    group_id,
    task_id,
    step,
    rollouts,
    successes,
    successes / rollouts AS p,
    (successes / rollouts) * (1 - successes / rollouts) AS variance,
    round(reward_sum / rollouts, 9) AS mean_reward
FROM group_totals_with(threshold := threshold);
