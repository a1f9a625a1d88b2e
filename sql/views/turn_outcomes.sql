-- turn_outcomes: where episodes break. One row per (task_id, step, turn) where turn is a user turn (1-based)
-- that at least one of the task's scored rollouts at that step reached (scored_trajectories: policy rollouts
-- that ran to a verdict).
--   rollouts  the task's scored rollouts at that step
--   reached   rollouts that reached this turn
--   failed    rollouts whose episode first went wrong in this turn
--   passed    rollouts that reached this turn and did not first fail in it (they went on, or succeeded)
--   fail_rate failed / reached
-- A rollout's turns reached and first failed turn are the episode player's (meta.turns, meta.failed_turn); a
-- trajectory imported without them counts its user messages as the turns reached and, when it failed (success as
-- recorded, else reward >= 0.5), fails in the last of them. Example: "turn 3 of file-system tasks" is
-- `SELECT turn, sum(failed) / sum(reached) FROM turn_outcomes JOIN tasks USING (task_id) WHERE ... GROUP BY turn`.
-- requires: scored_trajectories
CREATE OR REPLACE VIEW turn_outcomes AS
WITH episodes AS (
    SELECT task_id, step, turns,
           CASE WHEN won THEN NULL ELSE least(coalesce(failed_turn, turns), turns) END AS failed_turn,
           count(*) OVER (PARTITION BY task_id, step) AS rollouts
    FROM (
        SELECT task_id, step,
               greatest(coalesce(
                   TRY_CAST(json_extract_string(meta, '$.turns') AS INTEGER),
                   len(list_filter(json_extract_string(messages, '$[*].role'), lambda role: role = 'user'))
               ), 1) AS turns,
               TRY_CAST(json_extract_string(meta, '$.failed_turn') AS INTEGER) AS failed_turn,
               coalesce(success, reward >= 0.5) AS won
        FROM scored_trajectories
    )
),
reached AS (
    SELECT task_id, step, rollouts, failed_turn, unnest(range(1, turns + 1)) AS turn FROM episodes
)
SELECT task_id, step, turn,
       any_value(rollouts) AS rollouts,
       count(*) AS reached,
       count(*) FILTER (WHERE failed_turn = turn) AS failed,
       count(*) FILTER (WHERE failed_turn IS DISTINCT FROM turn) AS passed,
       count(*) FILTER (WHERE failed_turn = turn) / count(*) AS fail_rate
FROM reached
GROUP BY task_id, step, turn;
