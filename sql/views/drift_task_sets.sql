-- drift_task_sets: one row per (round, task) in the round's task set: the tasks of its weight set
-- (task_weights), or, for a round without one, the tasks its rollouts attempted.
--   round          the round
--   task_id        the task
--   weight         its weight (NULL for a round without a weight set)
--   probability    weight / the round's total weight: the chance a draw picks it (NULL without a weight set)
--   source         tasks.source
--   synthesized    source = 'synthesized'
--   previous_round the previous round that has a task set (NULL for the first)
--   new            the task was not in the previous round's set (NULL for the first round)
-- requires: drift_rounds, scored_trajectories
CREATE OR REPLACE VIEW drift_task_sets AS
WITH members AS (
    SELECT round, task_id, weight FROM task_weights
    UNION ALL
    SELECT DISTINCT r.round, t.task_id, CAST(NULL AS DOUBLE) AS weight
    FROM drift_rounds AS r
    JOIN scored_trajectories AS t ON t.step BETWEEN r.first_step AND r.last_step
    WHERE r.round NOT IN (SELECT round FROM weight_sets)
),
set_rounds AS (
    SELECT round, lag(round) OVER (ORDER BY round) AS previous_round FROM (SELECT DISTINCT round FROM members)
)
SELECT
    m.round,
    m.task_id,
    m.weight,
    m.weight / sum(m.weight) OVER (PARTITION BY m.round) AS probability,
    t.source,
    coalesce(t.source = 'synthesized', false) AS synthesized,
    s.previous_round,
    CASE WHEN s.previous_round IS NULL THEN NULL
         ELSE NOT EXISTS (SELECT 1 FROM members AS p WHERE p.round = s.previous_round AND p.task_id = m.task_id)
    END AS new
FROM members AS m
JOIN set_rounds AS s USING (round)
LEFT JOIN tasks AS t USING (task_id);
