-- flagged_trajectories_with(threshold := 0.5, w := 3, theta := 5, min_n := 50, forgetting_form := 'group'):
-- one row per (trajectory_id, signal); a trajectory carrying several signals has one row for each.
--   trajectory_id  the trajectory
--   task_id        its task
--   step           its step
--   group_id       its group
--   signal         'forgetting', 'boundary' (its group has mixed outcomes) or 'rare' (its action pattern was
--                  rare at its step)
-- forgetting_form chooses the form of the forgetting signal: 'group' (the engine's default: every rollout of a
-- task at a step where forgetting_with fires, the step's mean score against the w earlier scores) or
-- 'trajectory' (the paper's form: each failed rollout whose task had a success-level score among its w most
-- recent earlier scores, forgetting_trajectories_with); any other value is an error.
-- Group forgetting and boundary are properties of a whole group (a group is one task at one step), so both
-- are found per group first and reach the trajectories through one join on group_id.
-- requires: scored_trajectories, group_outcomes_with, forgetting_with, forgetting_trajectories_with
-- requires: rare_trajectories_with
CREATE OR REPLACE MACRO flagged_trajectories_with(threshold := 0.5, w := 3, theta := 5, min_n := 50,
                                                  forgetting_form := 'group') AS TABLE
WITH form AS (
    SELECT CASE WHEN forgetting_form IN ('group', 'trajectory') THEN forgetting_form
                ELSE error('flagged_trajectories_with: forgetting_form must be ''group'' or ''trajectory'', got '''
                           || forgetting_form || '''') END AS form
),
groups AS MATERIALIZED (
    SELECT group_id, task_id, step, successes > 0 AND successes < rollouts AS mixed
    FROM group_outcomes_with(threshold := threshold)
),
group_signals AS (
    SELECT g.group_id, 'forgetting' AS signal
    FROM groups AS g
    JOIN forgetting_with(w := w, threshold := threshold) AS f ON f.task_id = g.task_id AND f.step = g.step
    WHERE (SELECT form FROM form) = 'group'
    UNION ALL
    SELECT group_id, 'boundary' AS signal FROM groups WHERE mixed
)
SELECT t.trajectory_id, t.task_id, t.step, t.group_id, s.signal
FROM scored_trajectories AS t
JOIN group_signals AS s ON s.group_id = t.group_id
UNION ALL
SELECT trajectory_id, task_id, step, group_id, 'forgetting' AS signal
FROM forgetting_trajectories_with(w := w, threshold := threshold)
WHERE (SELECT form FROM form) = 'trajectory'
UNION ALL
SELECT trajectory_id, task_id, step, group_id, 'rare' AS signal
FROM rare_trajectories_with(theta := theta, min_n := min_n);
