-- forgetting_tasks_with(w := 3, threshold := 0.5): one row per task with at least one forgetting event, ranked
-- by what it lost (rank 1 first): the one ranking of forgetting, which `drift --table forgetting_tasks`,
-- `report` and `signals` show. A task is ranked by its worst drop (forgetting_drops_with: the fall from its
-- recent level times the scored steps it stayed down), not by how often its score crossed the threshold, so a
-- task that went from 0.95 to 0.05 and stayed there outranks one hovering around the threshold.
--   rank               1 for the task that lost the most (ties by total_lost, then task_id)
--   task_id            the task
--   lost               the worst drop's lost score: (level_before - level_after) * steps_down
--   step               the step of that drop
--   level_before       the task's recent level before it (the mean of its up to w earlier scores)
--   level_after        its mean score while down
--   steps_down         scored steps it stayed below threshold
--   recovered_step     the step it was back at >= threshold (NULL: still below at its last scored step)
--   total_lost         lost, summed over all its drops
--   forgetting_events  its drops (forgetting_events_with's count: success-then-failure transitions)
--   forgetting_flags   steps at which the forgetting signal fired (window w; task_signals' forgetting_flags): a
--                      drop fires it at each later step still below while the window holds a score >= threshold
--   first_step         the step of its first drop
--   last_step          the step of its latest drop
-- requires: forgetting_drops_with, task_history_with
CREATE OR REPLACE MACRO forgetting_tasks_with(w := 3, threshold := 0.5) AS TABLE
WITH drops AS (
    SELECT task_id,
           arg_max({'lost': lost, 'step': step, 'level_before': level_before, 'level_after': level_after,
                    'steps_down': steps_down, 'recovered_step': recovered_step}, (lost, -step)) AS worst,
           round(sum(lost), 9) AS total_lost,
           count(*) AS forgetting_events,
           min(step) AS first_step,
           max(step) AS last_step
    FROM forgetting_drops_with(w := w, threshold := threshold)
    GROUP BY task_id
),
flags AS (
    SELECT task_id, count(*) FILTER (WHERE forgot) AS forgetting_flags
    FROM task_history_with(w := w, threshold := threshold)
    GROUP BY task_id
)
SELECT
    CAST(row_number() OVER (ORDER BY d.worst.lost DESC, d.total_lost DESC, d.task_id) AS INTEGER) AS rank,
    d.task_id,
    d.worst.lost AS lost,
    d.worst.step AS step,
    d.worst.level_before AS level_before,
    d.worst.level_after AS level_after,
    d.worst.steps_down AS steps_down,
    d.worst.recovered_step AS recovered_step,
    d.total_lost,
    d.forgetting_events,
    f.forgetting_flags,
    d.first_step,
    d.last_step
FROM drops AS d
JOIN flags AS f USING (task_id);
