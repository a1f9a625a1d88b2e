-- forgetting_events_with(threshold := 0.5): one row per task with at least one scored step.
--   task_id            the task
--   scored_steps       steps at which the task was scored
--   forgetting_events  its forgetting events: transitions from a score >= threshold to the task's next score
--                      below it, the rows of forgetting_drops_with (which defines them)
-- requires: task_steps_with, forgetting_drops_with
CREATE OR REPLACE MACRO forgetting_events_with(threshold := 0.5) AS TABLE
SELECT s.task_id, s.scored_steps, coalesce(d.drops, 0) AS forgetting_events
FROM (SELECT task_id, count(*) AS scored_steps FROM task_steps_with(threshold := threshold) GROUP BY task_id) AS s
LEFT JOIN (SELECT task_id, count(*) AS drops FROM forgetting_drops_with(threshold := threshold) GROUP BY task_id) AS d
    USING (task_id);
