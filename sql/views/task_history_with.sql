-- task_history_with(w := 3, threshold := 0.5): one row per (task_id, step) at which the task was scored,
-- with the window of its earlier scores that forgetting looks at. forgetting_with and task_signals read this.
--   task_id        the task
--   step           the step
--   rollouts       rollouts of the task at that step
--   successes      rollouts that succeeded
--   score          the task's score at the step (mean reward)
--   recent_best    the best of its (up to) w most recent earlier scores (NULL at its first scored step)
--   window_scores  how many earlier scores that window held
--   forgot         recent_best >= threshold and score < threshold: forgetting fires
-- requires: task_steps_with
CREATE OR REPLACE MACRO task_history_with(w := 3, threshold := 0.5) AS TABLE
SELECT
    task_id,
    step,
    rollouts,
    successes,
    score,
    recent_best,
    window_scores,
    coalesce(recent_best >= threshold AND score < threshold, false) AS forgot
FROM (
    SELECT
        *,
        max(score) OVER recent AS recent_best,
        count(score) OVER recent AS window_scores
    FROM task_steps_with(threshold := threshold)
    WINDOW recent AS (PARTITION BY task_id ORDER BY step ROWS BETWEEN w PRECEDING AND 1 PRECEDING)
);
