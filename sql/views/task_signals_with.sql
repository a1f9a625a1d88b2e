-- task_signals_with(threshold := 0.5, w := 3, theta := 5, min_n := 50): one row per task, known from the
-- tasks table or from trajectories (a task never attempted has NULL scores and zero counts).
--   task_id             the task
--   latest_step         the last step it was scored at
--   latest_score        its score at that step
--   scored_steps        steps at which it was scored
--   forgetting_events   success-then-failure transitions over its history (threshold)
--   forgetting_flags    steps at which forgetting fired (window w)
--   groups              groups of rollouts it has
--   boundary_groups     groups with mixed outcomes
--   boundary_share      boundary_groups / groups
--   rare_trajectories   its trajectories whose action pattern was rare at their step
-- requires: task_history_with, forgetting_events_with, group_outcomes_with, rare_trajectories_with
CREATE OR REPLACE MACRO task_signals_with(threshold := 0.5, w := 3, theta := 5, min_n := 50) AS TABLE
WITH history AS (
    SELECT task_id, max(step) AS latest_step, arg_max(score, step) AS latest_score, count(*) AS scored_steps,
           count(*) FILTER (WHERE forgot) AS forgetting_flags
    FROM task_history_with(w := w, threshold := threshold)
    GROUP BY task_id
),
task_ids AS (
    SELECT task_id FROM tasks
    UNION
    SELECT task_id FROM history
),
groups AS (
    SELECT task_id, count(*) AS groups,
           count(*) FILTER (WHERE successes > 0 AND successes < rollouts) AS boundary_groups
    FROM group_outcomes_with(threshold := threshold)
    GROUP BY task_id
),
rare AS (
    SELECT task_id, count(*) AS rare_trajectories
    FROM rare_trajectories_with(theta := theta, min_n := min_n)
    GROUP BY task_id
)
SELECT
    task_ids.task_id,
    history.latest_step,
    history.latest_score,
    coalesce(history.scored_steps, 0) AS scored_steps,
    coalesce(events.forgetting_events, 0) AS forgetting_events,
    coalesce(history.forgetting_flags, 0) AS forgetting_flags,
    coalesce(groups.groups, 0) AS groups,
    coalesce(groups.boundary_groups, 0) AS boundary_groups,
    groups.boundary_groups / groups.groups AS boundary_share,
    coalesce(rare.rare_trajectories, 0) AS rare_trajectories
FROM task_ids
LEFT JOIN history USING (task_id)
LEFT JOIN forgetting_events_with(threshold := threshold) AS events USING (task_id)
LEFT JOIN groups USING (task_id)
LEFT JOIN rare USING (task_id);
