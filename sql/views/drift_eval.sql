-- drift_eval: one row per evaluation of a policy on the held-out tasks (`evaluations`): success on the eval
-- split against training step, the points of the paper's Figure 3.
--   step          the last training step the evaluated policy had seen (NULL when unknown)
--   round         the run round whose checkpoint was evaluated (NULL for the policy a run started from, label
--                 'start', and for evaluations made outside a run)
--   label         what was evaluated ('start', 'round 2', ...)
--   env           the environment
--   tasks         eval tasks evaluated
--   successes     of them, solved
--   success_rate  successes / tasks
--   eval_id       the evaluation (eval_results holds its per-task verdicts)
--   policy        the checkpoint directory or model string evaluated
--   created_at    when it was written
-- requires: (none)
CREATE OR REPLACE VIEW drift_eval AS
SELECT step, round, label, env, tasks, successes, success_rate, eval_id, policy, created_at
FROM evaluations;
