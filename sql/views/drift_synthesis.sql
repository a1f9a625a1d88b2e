-- drift_synthesis: one row per round with a task set: how much of it is synthesized, and what is new.
--   round                  the round
--   tasks                  tasks in its set (drift_task_sets)
--   synthesized            of them, tasks with source 'synthesized'
--   synthesized_share      synthesized / tasks
--   synthesized_weight     the probability mass on synthesized tasks (NULL for a round without a weight set)
--   new_tasks              tasks not in the previous round's set (NULL for the first round)
--   new_synthesized        of them, synthesized ones (NULL for the first round)
-- requires: drift_task_sets
CREATE OR REPLACE VIEW drift_synthesis AS
SELECT
    round,
    count(*) AS tasks,
    count(*) FILTER (WHERE synthesized) AS synthesized,
    count(*) FILTER (WHERE synthesized) / count(*) AS synthesized_share,
    CASE WHEN bool_and(probability IS NOT NULL)
         THEN coalesce(sum(probability) FILTER (WHERE synthesized), 0) END AS synthesized_weight,
    CASE WHEN any_value(previous_round) IS NULL THEN NULL ELSE count(*) FILTER (WHERE new) END AS new_tasks,
    CASE WHEN any_value(previous_round) IS NULL THEN NULL ELSE count(*) FILTER (WHERE new AND synthesized) END
        AS new_synthesized
FROM drift_task_sets
GROUP BY round;
