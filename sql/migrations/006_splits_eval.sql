-- 006_splits_eval: held-out tasks, and the evaluations of policies on them.
--
-- tasks.split  'train' (every task so far, and the default) or 'eval': an eval task is held out. The curriculum
--              never weighs it (task_curriculum_with leaves it out), so no trainer draws it, and its results go
--              to eval_results, never to trajectories, so no signal or synthesis ever sees it.
ALTER TABLE tasks ADD COLUMN split VARCHAR DEFAULT 'train';

-- evaluations: one row per evaluation of one policy on a set of eval tasks with fixed settings.
--   eval_id       hash of (policy, env, task ids, settings): evaluating the same again reuses the stored rows
--   policy        the checkpoint directory or model string evaluated
--   round         the run round whose checkpoint it is (NULL when not from a run); see `label`
--   label         what was evaluated, e.g. 'round 2' or 'start' (the policy round 0 started from)
--   env           the environment
--   settings      JSON: how it was evaluated (greedy decoding, max new tokens, ...)
--   tasks         eval tasks evaluated
--   successes     of those, solved
--   success_rate  successes / tasks
--   step          the last training step the policy had seen (NULL when unknown)
--   created_at    when it was written
CREATE TABLE evaluations (
    eval_id      VARCHAR PRIMARY KEY,
    policy       VARCHAR NOT NULL,
    round        INTEGER,
    label        VARCHAR,
    env          VARCHAR NOT NULL,
    settings     JSON,
    tasks        BIGINT NOT NULL,
    successes    BIGINT NOT NULL,
    success_rate DOUBLE,
    step         BIGINT,
    created_at   TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- eval_results: one row per (evaluation, task).
--   reward, success, reason  the environment's verdict
--   actions                  the tool calls made, [{"name", "arguments"}]
--   completion               what the policy wrote (text or messages JSON)
CREATE TABLE eval_results (
    eval_id    VARCHAR NOT NULL,
    task_id    VARCHAR NOT NULL,
    reward     DOUBLE NOT NULL,
    success    BOOLEAN NOT NULL,
    reason     VARCHAR,
    actions    JSON,
    completion JSON,
    PRIMARY KEY (eval_id, task_id)
);
