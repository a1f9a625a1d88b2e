-- group_health_with(threshold := 0.5): one row per training step with scored rollouts: how many of its GRPO groups
-- could teach the trainer anything. A dead group (every reward equal: all solved, all failed, or one rollout) has
-- zero advantage, so its rollouts carry no gradient (what DAPO's dynamic sampling and the dapo-filter strategy act
-- on).
--   step            the step
--   round           the round whose steps include it (drift_rounds; NULL when none does)
--   groups          groups generated at the step (group_spread_with)
--   dead_groups     of them, dead (zero reward variance)
--   all_solved      dead groups whose rollouts all succeeded
--   all_failed      dead groups whose rollouts all failed
--   dead_share      dead_groups / groups
--   mean_spread     mean over the step's groups of the within-group reward standard deviation, 9 decimals
--   rollouts        scored rollouts at the step
--   live_rollouts   of them, rollouts in groups that are not dead
--   gradient_share  live_rollouts / rollouts: the share of the step's rollouts that carry gradient
-- requires: group_spread_with, drift_rounds
CREATE OR REPLACE MACRO group_health_with(threshold := 0.5) AS TABLE
WITH steps AS (
    SELECT step, count(*) AS groups, count(*) FILTER (WHERE dead) AS dead_groups,
           count(*) FILTER (WHERE all_solved) AS all_solved, count(*) FILTER (WHERE all_failed) AS all_failed,
           round(avg(spread), 9) AS mean_spread, sum(rollouts) AS rollouts,
           coalesce(sum(rollouts) FILTER (WHERE NOT dead), 0) AS live_rollouts
    FROM group_spread_with(threshold := threshold)
    GROUP BY step
)
SELECT s.step, r.round, s.groups, s.dead_groups, s.all_solved, s.all_failed, s.dead_groups / s.groups AS dead_share,
       s.mean_spread, s.rollouts, s.live_rollouts, s.live_rollouts / s.rollouts AS gradient_share
FROM steps AS s
LEFT JOIN drift_rounds AS r ON s.step BETWEEN r.first_step AND r.last_step;
