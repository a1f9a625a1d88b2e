-- forgetting_with(w := 3, threshold := 0.5): one row per (task_id, step) where forgetting fires:
-- one of the task's w most recent earlier scores was >= threshold and its score at this step is below.
--   task_id        the task
--   step           the step at which it fired
--   score          the task's score at that step (mean reward)
--   recent_best    the best of the (up to) w most recent earlier scores
--   window_scores  how many earlier scores the window held (fewer than w early in a task's history)
--   w              the window used
--   threshold      the threshold used
-- requires: task_history_with
CREATE OR REPLACE MACRO forgetting_with(w := 3, threshold := 0.5) AS TABLE
SELECT task_id, step, score, recent_best, window_scores, CAST(w AS INTEGER) AS w, CAST(threshold AS DOUBLE) AS threshold
FROM task_history_with(w := w, threshold := threshold)
WHERE forgot;
