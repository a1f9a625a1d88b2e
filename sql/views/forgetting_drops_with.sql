-- forgetting_drops_with(w := 3, threshold := 0.5): one row per forgetting event, with what it cost. An event is
-- a drop: a step where the task's score falls below threshold while its previous score was >= threshold (the
-- one definition of a forgetting event; forgetting_events_with and task_signals count these rows). The drop's
-- stretch is the drop and the task's next scored steps while its score stays below threshold.
--   task_id         the task
--   step            the step of the drop (the first step below threshold)
--   previous_score  the task's score at its previous scored step (>= threshold)
--   level_before    the task's recent level: the mean of its (up to) w scores before the drop
--   level_after     the mean of its scores over the stretch (levels and lost rounded to 9 decimals)
--   steps_down      scored steps in the stretch (how long it stayed down)
--   last_down_step  the last step of the stretch
--   recovered_step  the task's next step at >= threshold after the stretch (NULL: still below at its last step)
--   lost            (level_before - level_after) * steps_down: the score lost, summed over the stretch
--   w               the window used
--   threshold       the threshold used
-- requires: task_steps_with
CREATE OR REPLACE MACRO forgetting_drops_with(w := 3, threshold := 0.5) AS TABLE
WITH history AS (
    SELECT
        task_id,
        step,
        score,
        score >= threshold AS up,
        lag(score) OVER (PARTITION BY task_id ORDER BY step) AS previous_score,
        avg(score) OVER (PARTITION BY task_id ORDER BY step ROWS BETWEEN w PRECEDING AND 1 PRECEDING)
            AS level_before
    FROM task_steps_with(threshold := threshold)
),
numbered AS (
    -- every step below threshold that follows a drop belongs to the latest drop's stretch; a step at or above
    -- threshold ends it (a later step below is the next drop)
    SELECT *,
           sum(CAST(coalesce(previous_score >= threshold AND NOT up, false) AS INTEGER))
               OVER (PARTITION BY task_id ORDER BY step) AS drop_number
    FROM history
),
stretches AS (
    SELECT
        task_id,
        min(step) AS step,
        arg_min(previous_score, step) AS previous_score,
        round(arg_min(level_before, step), 9) AS level_before,
        round(avg(score) FILTER (WHERE NOT up), 9) AS level_after,
        count(*) FILTER (WHERE NOT up) AS steps_down,
        max(step) FILTER (WHERE NOT up) AS last_down_step,
        min(step) FILTER (WHERE up) AS recovered_step,
        round((arg_min(level_before, step) - avg(score) FILTER (WHERE NOT up)) * count(*) FILTER (WHERE NOT up), 9)
            AS lost
    FROM numbered
    WHERE drop_number > 0
    GROUP BY task_id, drop_number
)
SELECT *, CAST(w AS INTEGER) AS w, CAST(threshold AS DOUBLE) AS threshold FROM stretches;
