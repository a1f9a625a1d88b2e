-- task_curriculum_with(threshold := 0.5, w := 3, theta := 5, min_n := 50, recent := 3,
--                      forgetting_form := 'group'): one row per training task (split 'train'; eval tasks are
-- held out and never weighed): the facts the curriculum strategies weigh a task by. "Now" is the latest step
-- with a scored rollout.
--   task_id               the task
--   source                where it came from (tasks.source; 'synthesized' for accepted candidates)
--   rollouts              its scored rollouts over all steps (0: never attempted)
--   scored_steps          steps at which it was scored
--   latest_step           the last step it was scored at (NULL: never attempted)
--   latest_score          its score at that step
--   steps_since_attempt   now - latest_step; for a task never attempted, now - first step + 1 (staler than any
--                         attempted task); 0 when the store has no scored rollout
--   last_group_rollouts   rollouts in its latest group (latest step, then greatest group_id); NULL if none
--   last_group_successes  successes in that group (threshold)
--   last_group_p          success rate of that group
--   forgetting_recent     forgetting_form 'group': share of its last `recent` scored steps at which forgetting
--                         fired (window w); 'trajectory': share of its rollouts in those steps that
--                         forgetting_trajectories_with flags
--   boundary_recent       share of its groups in those steps with mixed outcomes
--   rare_recent           share of its rollouts in those steps whose action pattern was rare at their step
--   dead_recent           share of its groups in those steps that were dead (every reward equal: no gradient;
--                         group_spread_with)
-- requires: task_history_with, group_outcomes_with, group_spread_with, rare_trajectories_with, forgetting_trajectories_with
CREATE OR REPLACE MACRO task_curriculum_with(threshold := 0.5, w := 3, theta := 5, min_n := 50, recent := 3,
                                             forgetting_form := 'group') AS TABLE
WITH history AS (
    SELECT *, row_number() OVER (PARTITION BY task_id ORDER BY step DESC) AS age
    FROM task_history_with(w := w, threshold := threshold)
),
span AS (
    SELECT max(step) AS now_step, min(step) AS first_step FROM history
),
per_task AS (
    SELECT task_id,
           CAST(sum(rollouts) AS BIGINT) AS rollouts,
           count(*) AS scored_steps,
           max(step) AS latest_step,
           arg_max(score, step) AS latest_score,
           avg(CASE WHEN forgot THEN 1.0 ELSE 0.0 END) FILTER (WHERE age <= recent) AS forgetting_recent,
           CAST(sum(rollouts) FILTER (WHERE age <= recent) AS BIGINT) AS recent_rollouts,
           min(step) FILTER (WHERE age <= recent) AS recent_from
    FROM history
    GROUP BY task_id
),
recent_groups AS (
    SELECT g.task_id,
           count(*) AS groups,
           count(*) FILTER (WHERE g.successes > 0 AND g.successes < g.rollouts) AS boundary_groups
    FROM group_outcomes_with(threshold := threshold) AS g
    JOIN per_task AS p ON p.task_id = g.task_id AND g.step >= p.recent_from
    GROUP BY g.task_id
),
recent_dead AS (
    SELECT g.task_id, count(*) AS groups, count(*) FILTER (WHERE g.dead) AS dead_groups
    FROM group_spread_with(threshold := threshold) AS g
    JOIN per_task AS p ON p.task_id = g.task_id AND g.step >= p.recent_from
    GROUP BY g.task_id
),
last_group AS (
    SELECT task_id, rollouts, successes, p
    FROM group_outcomes_with(threshold := threshold)
    QUALIFY row_number() OVER (PARTITION BY task_id ORDER BY step DESC, group_id DESC) = 1
),
recent_forgot AS (
    SELECT f.task_id, count(*) AS forgot_trajectories
    FROM forgetting_trajectories_with(w := w, threshold := threshold) AS f
    JOIN per_task AS p ON p.task_id = f.task_id AND f.step >= p.recent_from
    GROUP BY f.task_id
),
recent_rare AS (
    SELECT r.task_id, count(*) AS rare_trajectories
    FROM rare_trajectories_with(theta := theta, min_n := min_n) AS r
    JOIN per_task AS p ON p.task_id = r.task_id AND r.step >= p.recent_from
    GROUP BY r.task_id
)
SELECT
    tasks.task_id,
    tasks.source,
    coalesce(per_task.rollouts, 0) AS rollouts,
    coalesce(per_task.scored_steps, 0) AS scored_steps,
    per_task.latest_step,
    per_task.latest_score,
    CASE WHEN span.now_step IS NULL THEN 0
         WHEN per_task.latest_step IS NULL THEN span.now_step - span.first_step + 1
         ELSE span.now_step - per_task.latest_step END AS steps_since_attempt,
    last_group.rollouts AS last_group_rollouts,
    last_group.successes AS last_group_successes,
    last_group.p AS last_group_p,
    CASE WHEN forgetting_form = 'group' THEN coalesce(per_task.forgetting_recent, 0.0)
         WHEN forgetting_form = 'trajectory'
             THEN coalesce(coalesce(recent_forgot.forgot_trajectories, 0) / per_task.recent_rollouts, 0.0)
         ELSE error('task_curriculum_with: forgetting_form must be ''group'' or ''trajectory'', got '''
                    || forgetting_form || '''') END AS forgetting_recent,
    coalesce(recent_groups.boundary_groups / recent_groups.groups, 0.0) AS boundary_recent,
    coalesce(coalesce(recent_rare.rare_trajectories, 0) / per_task.recent_rollouts, 0.0) AS rare_recent,
    coalesce(recent_dead.dead_groups / recent_dead.groups, 0.0) AS dead_recent
FROM tasks
CROSS JOIN span
LEFT JOIN per_task USING (task_id)
LEFT JOIN recent_groups USING (task_id)
LEFT JOIN last_group USING (task_id)
LEFT JOIN recent_forgot USING (task_id)
LEFT JOIN recent_rare USING (task_id)
LEFT JOIN recent_dead USING (task_id)
WHERE tasks.split = 'train';
