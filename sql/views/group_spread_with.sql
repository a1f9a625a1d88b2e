-- group_spread_with(threshold := 0.5): one row per GRPO group (the rollouts of one task generated together) with the
-- spread of its rewards, which GRPO's advantages are made of: a group whose rewards are all equal (all solved,
-- all failed, or one rollout) has zero advantage for every rollout and gives the trainer no gradient.
--   group_id     the group
--   task_id      its task
--   step         the step that generated it
--   rollouts     scored rollouts in the group
--   successes    of them, successes (success as recorded, else reward >= threshold)
--   spread       population standard deviation of the group's rewards (0 for one rollout)
--   dead         true when every reward of the group is the same (zero variance: no gradient)
--   all_solved   dead, and every rollout succeeded
--   all_failed   dead, and none succeeded
-- requires: scored_trajectories
CREATE OR REPLACE MACRO group_spread_with(threshold := 0.5) AS TABLE
WITH groups AS (
    SELECT group_id, min(task_id) AS task_id, min(step) AS step, count(*) AS rollouts,
           count(*) FILTER (WHERE coalesce(success, reward >= threshold)) AS successes,
           coalesce(stddev_pop(reward), 0) AS spread, max(reward) = min(reward) AS dead
    FROM scored_trajectories
    GROUP BY group_id
)
SELECT group_id, task_id, step, rollouts, successes, spread, dead,
       dead AND successes = rollouts AS all_solved,
       dead AND successes = 0 AS all_failed
FROM groups;
