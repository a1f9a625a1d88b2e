-- drift_eval_rounds: one row per round whose checkpoint was evaluated on the held-out tasks: the latest such
-- evaluation (created_at), as run_rounds counts it. The drift summary's eval_* rows.
--   round          the round (evaluations.round)
--   eval_success   its success_rate
--   eval_tasks     eval tasks it covered
--   eval_step      the last training step the checkpoint had seen
--   evaluations    evaluations of the round's checkpoint in the store (more than 1 when evaluated again)
-- requires: (none)
CREATE OR REPLACE VIEW drift_eval_rounds AS
SELECT
    round,
    arg_max(success_rate, (created_at, eval_id)) AS eval_success,
    arg_max(tasks, (created_at, eval_id)) AS eval_tasks,
    arg_max(step, (created_at, eval_id)) AS eval_step,
    count(*) AS evaluations
FROM evaluations
WHERE round IS NOT NULL
GROUP BY round;
