-- drift_tools: one row per (round, tool): how often the policy called each tool in the round's rollouts.
--   round   the round (drift_rounds)
--   tool    the tool name (trajectories.actions[*].name)
--   calls   calls of it in the round's scored rollouts
--   share   calls / all tool calls in the round
--   rollouts  rollouts that called it at least once
-- requires: drift_rounds, scored_trajectories
CREATE OR REPLACE VIEW drift_tools AS
WITH calls AS (
    SELECT r.round, t.trajectory_id, unnest(json_extract_string(t.actions, '$[*].name')) AS tool
    FROM drift_rounds AS r
    JOIN scored_trajectories AS t ON t.step BETWEEN r.first_step AND r.last_step
    WHERE t.actions IS NOT NULL
)
SELECT round, tool, count(*) AS calls, count(*) / sum(count(*)) OVER (PARTITION BY round) AS share,
       count(DISTINCT trajectory_id) AS rollouts
FROM calls
WHERE tool IS NOT NULL
GROUP BY round, tool;
