-- drift_env_classes: one row per (round, environment class): how much of the round's training exercised
-- each class. A task's classes are its spec's involved_classes (BFCL's API classes, e.g. GorillaFileSystem);
-- a task without them counts under its env ('(unknown)' when the task has no env or no tasks row).
--   round       the round (drift_rounds)
--   env_class   the class
--   rollouts    scored rollouts in the round of tasks involving it
--   tasks       distinct such tasks attempted in the round
--   share       rollouts / all scored rollouts of the round (a task with two classes counts for both, so
--               shares can add up to more than 1)
-- requires: drift_rounds, scored_trajectories
CREATE OR REPLACE VIEW drift_env_classes AS
WITH task_classes AS (
    SELECT task_id, unnest(CASE WHEN len(classes) > 0 THEN classes ELSE [coalesce(env, '(unknown)')] END) AS env_class
    FROM (SELECT task_id, env, coalesce(json_extract_string(spec, '$.involved_classes[*]'), []) AS classes FROM tasks)
),
round_rollouts AS (
    SELECT r.round, t.task_id, t.trajectory_id, count(*) OVER (PARTITION BY r.round) AS round_total
    FROM drift_rounds AS r
    JOIN scored_trajectories AS t ON t.step BETWEEN r.first_step AND r.last_step
)
SELECT
    o.round,
    coalesce(c.env_class, '(unknown)') AS env_class,
    count(*) AS rollouts,
    count(DISTINCT o.task_id) AS tasks,
    count(*) / any_value(o.round_total) AS share
FROM round_rollouts AS o
LEFT JOIN task_classes AS c USING (task_id)
GROUP BY o.round, coalesce(c.env_class, '(unknown)');
