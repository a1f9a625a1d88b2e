-- drift_rounds: one row per round of the store, with the training steps it covers (the drift views'
-- spine). Rounds are those of `rounds`, `weight_sets`, `failure_patterns` and `candidates`, so rounds made by
-- hand with the separate commands count too; a store with trajectories and none of these is one round 0.
-- With the connection's variable drift_window set (SET VARIABLE drift_window = 3, as `drift --step-window` and
-- `report` do for a store of ingested rollouts), the spine is windows of that many of the steps that exist
-- instead, status 'window', numbered in the round column from 0, and every drift view that goes by drift_rounds
-- goes by those windows. Windows follow the steps that exist: the steps with trajectories are cut into runs
-- without a gap (a gap: two consecutive steps further apart than the closest two), and each run into windows
-- of drift_window steps (its last window may hold fewer), so no window is empty and none spans a gap.
--   round       the round
--   status      rounds.status ('running', 'finished'), or 'manual' when the round has no rounds row
--   first_step  its first training step: rounds.first_step when `run` recorded it, else the step after the
--               previous round's last step (the first step in the store for the first round)
--   last_step   its last training step: first_step + trainer.steps_per_round - 1 (rounds.config) when `run`
--               recorded it, else the step its failure patterns were found at, else the step the next
--               round's weights saw (weight_sets.step), else (latest round) the last step in the store
--   steps_from  'run' (rounds.first_step and the config), 'inferred' (the fallbacks above) or 'window'
-- requires: (none)
CREATE OR REPLACE VIEW drift_rounds AS
WITH known AS (
    SELECT round FROM rounds
    UNION SELECT round FROM weight_sets
    UNION SELECT round FROM failure_patterns
    UNION SELECT round FROM candidates WHERE round IS NOT NULL
),
known_or_one AS (
    SELECT round FROM known
    UNION ALL
    SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM known) AND EXISTS (SELECT 1 FROM trajectories)
),
facts AS (
    SELECT
        k.round,
        r.status,
        r.first_step AS run_first,
        r.first_step + CAST(json_extract_string(r.config, '$.trainer.steps_per_round') AS BIGINT) - 1 AS run_last,
        (SELECT max(f.step) FROM failure_patterns AS f WHERE f.round = k.round) AS pattern_step,
        (SELECT w.step FROM weight_sets AS w WHERE w.round = k.round + 1) AS next_weights_step,
        k.round = (SELECT max(round) FROM known_or_one) AS latest
    FROM known_or_one AS k
    LEFT JOIN rounds AS r USING (round)
),
last_steps AS (
    SELECT *,
        coalesce(run_last, pattern_step, next_weights_step,
                 CASE WHEN latest THEN (SELECT max(step) FROM trajectories) END) AS last_step
    FROM facts
),
by_rounds AS (
    SELECT
        round,
        coalesce(status, 'manual') AS status,
        coalesce(run_first, lag(last_step) OVER (ORDER BY round) + 1,
                 CASE WHEN round = (SELECT min(round) FROM known_or_one) THEN (SELECT min(step) FROM trajectories) END)
            AS first_step,
        last_step,
        CASE WHEN run_first IS NOT NULL AND run_last IS NOT NULL THEN 'run' ELSE 'inferred' END AS steps_from
    FROM last_steps
),
steps AS (
    SELECT step, step - lag(step) OVER (ORDER BY step) AS gap
    FROM (SELECT DISTINCT step FROM trajectories WHERE step IS NOT NULL)
),
segments AS (
    -- runs of steps without a gap: a gap is a distance wider than the closest two steps' (the usual spacing)
    SELECT step,
           sum(CAST(coalesce(gap > (SELECT min(gap) FROM steps), false) AS INTEGER)) OVER (ORDER BY step) AS segment
    FROM steps
),
placed AS (
    SELECT step, segment,
           (row_number() OVER (PARTITION BY segment ORDER BY step) - 1) // size AS chunk
    FROM segments, (SELECT CAST(getvariable('drift_window') AS BIGINT) AS size)
    WHERE size >= 1
),
by_windows AS (
    SELECT CAST(row_number() OVER (ORDER BY min(step)) - 1 AS INTEGER) AS round, 'window' AS status,
           min(step) AS first_step, max(step) AS last_step, 'window' AS steps_from
    FROM placed
    GROUP BY segment, chunk
)
SELECT * FROM by_rounds WHERE getvariable('drift_window') IS NULL
UNION ALL
SELECT * FROM by_windows;
