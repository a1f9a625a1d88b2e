-- rare_patterns_with(theta := 5, min_n := 50): one row per action pattern, over the whole history.
--   action_pattern  the pattern
--   trajectories    trajectories with this pattern
--   share           trajectories / all trajectories with a pattern
--   rare            (all trajectories with a pattern) >= min_n AND share < theta / 100
--   first_step      first step the pattern occurred at
--   last_step       last step the pattern occurred at
--   rare_trajectories  trajectories with this pattern flagged 'rare' at their own step
-- requires: pattern_steps_with
CREATE OR REPLACE MACRO rare_patterns_with(theta := 5, min_n := 50) AS TABLE
SELECT
    action_pattern,
    trajectories,
    trajectories / total AS share,
    total >= min_n AND trajectories / total < theta / 100 AS rare,
    first_step,
    last_step,
    rare_trajectories
FROM (
    SELECT
        action_pattern,
        CAST(sum(trajectories) AS BIGINT) AS trajectories,
        CAST(sum(sum(trajectories)) OVER () AS BIGINT) AS total,
        min(step) AS first_step,
        max(step) AS last_step,
        CAST(coalesce(sum(trajectories) FILTER (WHERE rare), 0) AS BIGINT) AS rare_trajectories
    FROM pattern_steps_with(theta := theta, min_n := min_n)
    GROUP BY action_pattern
);
