-- boundary_with(threshold := 0.5): one row per group with mixed outcomes (at least one success and at
-- least one failure); every rollout of such a group is flagged 'boundary'.
--   task_id    the task
--   group_id   the group
--   step       the step that generated it
--   rollouts   rollouts in the group
--   successes  rollouts that succeeded
--   p          group success rate
--   variance   p * (1 - p)
-- requires: group_outcomes_with
CREATE OR REPLACE MACRO boundary_with(threshold := 0.5) AS TABLE
SELECT task_id, group_id, step, rollouts, successes, p, variance
FROM group_outcomes_with(threshold := threshold)
WHERE successes > 0 AND successes < rollouts;
