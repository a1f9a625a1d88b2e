-- drift_eval_steps_with(threshold := 0.5, w := 3, theta := 5, min_n := 50, forgetting_form := 'group'): one row per
-- training step that has scored rollouts or an evaluation with that step: held-out success against step next to
-- the rollouts the signals flagged at the step, as the paper's Figure 3 puts them (flagged_trajectories_with over
-- the whole history).
--   step          the step
--   round         the round whose steps include it (drift_rounds; NULL when none does, e.g. the step before
--                 the first, where the policy a run started from is evaluated)
--   rollouts      scored rollouts at the step (0 when none)
--   flagged       of them, rollouts carrying at least one signal
--   forgetting / boundary / rare   rollouts carrying each signal (a rollout may carry several)
--   eval_success  success rate of the latest evaluation (created_at) at the step (NULL when none)
--   eval_tasks    eval tasks that evaluation covered
--   evaluations   evaluations at the step
-- requires: drift_rounds, scored_trajectories, flagged_trajectories_with
CREATE OR REPLACE MACRO drift_eval_steps_with(threshold := 0.5, w := 3, theta := 5, min_n := 50,
                                              forgetting_form := 'group') AS TABLE
WITH rollouts AS (
    SELECT step, count(*) AS rollouts FROM scored_trajectories GROUP BY step
),
flags AS (
    SELECT
        step,
        count(DISTINCT trajectory_id) AS flagged,
        count(DISTINCT trajectory_id) FILTER (WHERE signal = 'forgetting') AS forgetting,
        count(DISTINCT trajectory_id) FILTER (WHERE signal = 'boundary') AS boundary,
        count(DISTINCT trajectory_id) FILTER (WHERE signal = 'rare') AS rare
    FROM flagged_trajectories_with(threshold := threshold, w := w, theta := theta, min_n := min_n,
                                   forgetting_form := forgetting_form)
    GROUP BY step
),
evals AS (
    SELECT step, arg_max(success_rate, (created_at, eval_id)) AS eval_success,
           arg_max(tasks, (created_at, eval_id)) AS eval_tasks, count(*) AS evaluations
    FROM evaluations WHERE step IS NOT NULL GROUP BY step
),
steps AS (
    SELECT step FROM rollouts UNION SELECT step FROM evals
)
SELECT
    s.step,
    r.round,
    coalesce(o.rollouts, 0) AS rollouts,
    coalesce(f.flagged, 0) AS flagged,
    coalesce(f.forgetting, 0) AS forgetting,
    coalesce(f.boundary, 0) AS boundary,
    coalesce(f.rare, 0) AS rare,
    e.eval_success,
    e.eval_tasks,
    coalesce(e.evaluations, 0) AS evaluations
FROM steps AS s
LEFT JOIN drift_rounds AS r ON s.step BETWEEN r.first_step AND r.last_step
LEFT JOIN rollouts AS o USING (step)
LEFT JOIN flags AS f USING (step)
LEFT JOIN evals AS e USING (step);
