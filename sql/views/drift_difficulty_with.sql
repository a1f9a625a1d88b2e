-- drift_difficulty_with(threshold := 0.5): one row per round with rollouts: how hard the round's tasks were
-- for the policy, as the distribution over tasks of each task's success rate in the round's steps (its
-- successes / its rollouts, over all its groups in the round).
--   round         the round (drift_rounds)
--   tasks         tasks attempted in the round
--   rollouts      scored rollouts in the round
--   success_rate  all successes / all rollouts of the round
--   p10, p25, median, p75, p90   quantiles of the per-task success rates (linear interpolation,
--                                quantile_cont)
--   solved        tasks whose every rollout succeeded (rate 1)
--   unsolved      tasks none of whose rollouts succeeded (rate 0)
-- requires: drift_rounds, task_steps_with
CREATE OR REPLACE MACRO drift_difficulty_with(threshold := 0.5) AS TABLE
WITH per_task AS (
    SELECT r.round, s.task_id, CAST(sum(s.rollouts) AS BIGINT) AS rollouts,
           CAST(sum(s.successes) AS BIGINT) AS successes,
           sum(s.successes) / sum(s.rollouts) AS rate
    FROM drift_rounds AS r
    JOIN task_steps_with(threshold := threshold) AS s ON s.step BETWEEN r.first_step AND r.last_step
    GROUP BY r.round, s.task_id
)
SELECT
    round,
    count(*) AS tasks,
    CAST(sum(rollouts) AS BIGINT) AS rollouts,
    sum(successes) / sum(rollouts) AS success_rate,
    quantile_cont(rate, 0.1) AS p10,
    quantile_cont(rate, 0.25) AS p25,
    quantile_cont(rate, 0.5) AS median,
    quantile_cont(rate, 0.75) AS p75,
    quantile_cont(rate, 0.9) AS p90,
    count(*) FILTER (WHERE rate = 1) AS solved,
    count(*) FILTER (WHERE rate = 0) AS unsolved
FROM per_task
GROUP BY round;
