-- run_rounds_with(threshold := 0.5, w := 3, theta := 5, min_n := 50, forgetting_form := 'group'): one row per round
-- of `coevolve-engine run`, every figure recomputed from the tables (run_phases.outputs only records what was printed).
--   round              the round
--   status             'running' or 'finished'
--   first_step         its first training step; last_step = first_step + trainer.steps_per_round - 1
--   last_step
--   rollouts           training rollouts at its steps
--   train_success      their success rate (threshold)
--   start_eval         held-out success of the policy round 0 started from (round 0 only; evaluations 'start')
--   eval_success       held-out success of the round's checkpoint (NULL when not evaluated)
--   eval_tasks         eval tasks that evaluation covered
--   forgetting         trajectories of its steps flagged forgetting (w, threshold, in the forgetting form
--                      'group' or 'trajectory', see flagged_trajectories_with)
--   boundary           ... flagged boundary
--   rare               ... flagged rare (theta, min_n)
--   patterns           failure patterns found in the round
--   candidates         candidates proposed for them
--   accepted           of those, accepted (now training tasks)
--   train_tasks        training tasks weighed for the round (weight_sets.tasks)
--   weights_reason     why the round's weights differ from the previous round's (weight_sets.reason)
--   training_seconds   what the round's training took, less its store writes (round_costs)
--   feedback_seconds   what the rest of the round took, store overhead included (round_costs)
--   feedback_share     feedback_seconds / training_seconds (the paper: 0.0967 AppWorld, 0.1276 BFCL)
--   contaminated       of its candidates, refused as near copies of a held-out task (reason 'contaminated')
--   dead_share         share of the GRPO groups of its steps that were dead: every reward equal, no gradient
--                      (group_health_with at threshold)
--   gradient_share     share of the rollouts of its steps in groups that were not dead (that carry gradient)
-- requires: scored_trajectories, flagged_trajectories_with, round_costs, group_health_with
CREATE OR REPLACE MACRO run_rounds_with(threshold := 0.5, w := 3, theta := 5, min_n := 50,
                                        forgetting_form := 'group') AS TABLE
WITH spans AS (
    SELECT round, status, first_step,
           first_step + CAST(json_extract(config, '$.trainer.steps_per_round') AS BIGINT) - 1 AS last_step
    FROM rounds
),
training AS (
    SELECT s.round, count(*) AS rollouts,
           avg(CASE WHEN coalesce(t.success, t.reward >= threshold) THEN 1.0 ELSE 0.0 END) AS train_success
    FROM spans AS s JOIN scored_trajectories AS t ON t.step BETWEEN s.first_step AND s.last_step
    GROUP BY s.round
),
flags AS (
    SELECT s.round,
           count(DISTINCT f.trajectory_id) FILTER (WHERE f.signal = 'forgetting') AS forgetting,
           count(DISTINCT f.trajectory_id) FILTER (WHERE f.signal = 'boundary') AS boundary,
           count(DISTINCT f.trajectory_id) FILTER (WHERE f.signal = 'rare') AS rare
    FROM spans AS s
    JOIN flagged_trajectories_with(threshold := threshold, w := w, theta := theta, min_n := min_n,
                                   forgetting_form := forgetting_form) AS f
      ON f.step BETWEEN s.first_step AND s.last_step
    GROUP BY s.round
),
evals AS (
    SELECT round, arg_max(success_rate, created_at) AS eval_success, arg_max(tasks, created_at) AS eval_tasks
    FROM evaluations WHERE round IS NOT NULL GROUP BY round
),
starts AS (
    SELECT arg_max(success_rate, created_at) AS start_eval FROM evaluations WHERE label = 'start'
),
found AS (
    SELECT round, count(*) AS patterns FROM failure_patterns GROUP BY round
),
proposed AS (
    SELECT round, count(*) AS candidates, count(*) FILTER (WHERE verdict = 'accepted') AS accepted,
           count(*) FILTER (WHERE reason = 'contaminated') AS contaminated
    FROM candidates GROUP BY round
),
health AS (
    SELECT s.round, sum(g.dead_groups) / sum(g.groups) AS dead_share,
           sum(g.live_rollouts) / sum(g.rollouts) AS gradient_share
    FROM spans AS s JOIN group_health_with(threshold := threshold) AS g ON g.step BETWEEN s.first_step AND s.last_step
    GROUP BY s.round
)
SELECT s.round, s.status, s.first_step, s.last_step,
       coalesce(training.rollouts, 0) AS rollouts, training.train_success,
       CASE WHEN s.round = 0 THEN (SELECT start_eval FROM starts) END AS start_eval,
       evals.eval_success, evals.eval_tasks,
       coalesce(flags.forgetting, 0) AS forgetting, coalesce(flags.boundary, 0) AS boundary,
       coalesce(flags.rare, 0) AS rare,
       coalesce(found.patterns, 0) AS patterns, coalesce(proposed.candidates, 0) AS candidates,
       coalesce(proposed.accepted, 0) AS accepted,
       weight_sets.tasks AS train_tasks, weight_sets.reason AS weights_reason,
       round_costs.training_seconds, round_costs.feedback_seconds, round_costs.feedback_share,
       coalesce(proposed.contaminated, 0) AS contaminated, health.dead_share, health.gradient_share
FROM spans AS s
LEFT JOIN training USING (round)
LEFT JOIN flags USING (round)
LEFT JOIN evals USING (round)
LEFT JOIN found USING (round)
LEFT JOIN proposed USING (round)
LEFT JOIN weight_sets USING (round)
LEFT JOIN round_costs USING (round)
LEFT JOIN health USING (round)
ORDER BY s.round;
