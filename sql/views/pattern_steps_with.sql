-- pattern_steps_with(theta := 5, min_n := 50): one row per (action_pattern, step) at which the pattern
-- occurred. A trajectory at step t with pattern p is rare when seen >= min_n and cumulative / seen < theta / 100.
--   action_pattern  the pattern (tool names in call order, repeats collapsed, joined by '>')
--   step            the step
--   trajectories    trajectories with this pattern at this step
--   cumulative      c_p: trajectories with this pattern at steps <= step
--   seen            N: trajectories with any pattern at steps <= step
--   share           cumulative / seen
--   rare            seen >= min_n AND share < theta / 100
-- Trajectories whose actions were not recorded (action_pattern NULL) have no pattern and are not counted.
-- requires: scored_trajectories
CREATE OR REPLACE MACRO pattern_steps_with(theta := 5, min_n := 50) AS TABLE
WITH per_step AS (
    SELECT action_pattern, step, count(*) AS trajectories
    FROM scored_trajectories
    WHERE action_pattern IS NOT NULL
    GROUP BY action_pattern, step
),
seen_by_step AS (
    SELECT step, CAST(sum(sum(trajectories)) OVER (ORDER BY step) AS BIGINT) AS seen
    FROM per_step
    GROUP BY step
)
SELECT
    action_pattern,
    step,
    trajectories,
    cumulative,
    seen,
    cumulative / seen AS share,
    seen >= min_n AND cumulative / seen < theta / 100 AS rare
FROM (
    SELECT action_pattern, step, trajectories,
           CAST(sum(trajectories) OVER (PARTITION BY action_pattern ORDER BY step) AS BIGINT) AS cumulative
    FROM per_step
)
JOIN seen_by_step USING (step);
