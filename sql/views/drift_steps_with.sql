-- drift_steps_with(threshold := 0.5): one row per training step with scored rollouts: success against step.
--   step          the step
--   round         the round whose steps include it (drift_rounds; NULL when none does)
--   rollouts      scored rollouts at the step
--   successes     of them, successes (success as recorded, else reward >= threshold)
--   success_rate  successes / rollouts
--   mean_reward   mean reward, rounded to 9 decimals
-- requires: drift_rounds, scored_trajectories
CREATE OR REPLACE MACRO drift_steps_with(threshold := 0.5) AS TABLE
WITH steps AS (
    SELECT step, count(*) AS rollouts, count(*) FILTER (WHERE coalesce(success, reward >= threshold)) AS successes,
           round(avg(reward), 9) AS mean_reward
    FROM scored_trajectories
    GROUP BY step
)
SELECT s.step, r.round, s.rollouts, s.successes, s.successes / s.rollouts AS success_rate, s.mean_reward
FROM steps AS s
LEFT JOIN drift_rounds AS r ON s.step BETWEEN r.first_step AND r.last_step;
