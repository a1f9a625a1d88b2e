-- forgetting_events_with(threshold := 0.5): one row per task with at least one scored step.
--   task_id            the task
--   scored_steps       steps at which the task was scored
--   forgetting_events  transitions from a score >= threshold to the task's next score below it
-- requires: task_steps_with
CREATE OR REPLACE MACRO forgetting_events_with(threshold := 0.5) AS TABLE
SELECT
    task_id,
    count(*) AS scored_steps,
    count(*) FILTER (WHERE previous_score >= threshold AND score < threshold) AS forgetting_events
FROM (
    SELECT task_id, score, lag(score) OVER (PARTITION BY task_id ORDER BY step) AS previous_score
    FROM task_steps_with(threshold := threshold)
)
GROUP BY task_id;
