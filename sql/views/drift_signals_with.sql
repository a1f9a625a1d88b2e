-- drift_signals_with(threshold := 0.5, w := 3, theta := 5, min_n := 50, forgetting_form := 'group'): one row per
-- round: the rollouts of the round's steps that the signals flagged (flagged_trajectories_with over the whole
-- history, so a round's forgetting sees the scores of earlier rounds).
--   round         the round (drift_rounds)
--   trajectories  scored rollouts in the round's steps
--   flagged       of them, rollouts carrying at least one signal
--   forgetting / boundary / rare   rollouts carrying each signal (a rollout may carry several)
--   flagged_share flagged / trajectories (NULL for a round without rollouts)
-- requires: drift_rounds, scored_trajectories, flagged_trajectories_with
CREATE OR REPLACE MACRO drift_signals_with(threshold := 0.5, w := 3, theta := 5, min_n := 50,
                                           forgetting_form := 'group') AS TABLE
WITH flags AS MATERIALIZED (
    SELECT trajectory_id, step, signal
    FROM flagged_trajectories_with(threshold := threshold, w := w, theta := theta, min_n := min_n,
                                   forgetting_form := forgetting_form)
),
rollouts AS (
    SELECT r.round, count(t.trajectory_id) AS trajectories
    FROM drift_rounds AS r
    LEFT JOIN scored_trajectories AS t ON t.step BETWEEN r.first_step AND r.last_step
    GROUP BY r.round
),
flagged AS (
    SELECT
        r.round,
        count(DISTINCT f.trajectory_id) AS flagged,
        count(DISTINCT f.trajectory_id) FILTER (WHERE f.signal = 'forgetting') AS forgetting,
        count(DISTINCT f.trajectory_id) FILTER (WHERE f.signal = 'boundary') AS boundary,
        count(DISTINCT f.trajectory_id) FILTER (WHERE f.signal = 'rare') AS rare
    FROM drift_rounds AS r
    LEFT JOIN flags AS f ON f.step BETWEEN r.first_step AND r.last_step
    GROUP BY r.round
)
SELECT
    round,
    trajectories,
    flagged,
    forgetting,
    boundary,
    rare,
    CASE WHEN trajectories > 0 THEN flagged / trajectories END AS flagged_share
FROM rollouts
JOIN flagged USING (round);
