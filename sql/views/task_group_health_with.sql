-- task_group_health_with(threshold := 0.5): one row per task with scored rollouts: how often its GRPO groups were
-- dead (every reward equal, so no gradient; see group_spread_with).
--   task_id      the task
--   groups       its groups
--   dead_groups  of them, dead
--   all_solved   dead groups whose rollouts all succeeded
--   all_failed   dead groups whose rollouts all failed
--   dead_share   dead_groups / groups
--   mean_spread  mean within-group reward standard deviation over its groups, 9 decimals
--   last_step    the step of its latest group
-- requires: group_spread_with
CREATE OR REPLACE MACRO task_group_health_with(threshold := 0.5) AS TABLE
SELECT task_id, count(*) AS groups, count(*) FILTER (WHERE dead) AS dead_groups,
       count(*) FILTER (WHERE all_solved) AS all_solved, count(*) FILTER (WHERE all_failed) AS all_failed,
       count(*) FILTER (WHERE dead) / count(*) AS dead_share, round(avg(spread), 9) AS mean_spread,
       max(step) AS last_step
FROM group_spread_with(threshold := threshold)
GROUP BY task_id;
