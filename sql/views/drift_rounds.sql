-- drift_rounds: one row per round of the store, with the training steps it covers (the drift views'
-- spine). Rounds are those of `rounds`, `weight_sets`, `failure_patterns` and `candidates`, so rounds made by
-- hand with the separate commands count too; a store with trajectories and none of these is one round 0.
-- With the connection's variable drift_window set (SET VARIABLE drift_window = 3, as `drift --window` and
-- `report` do for a store of ingested rollouts), the spine is windows of that many training steps instead:
-- window i (in the round column) covers steps min_step + i * drift_window onward, status 'window', and every
-- drift view that goes by drift_rounds goes by those windows.
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
bounds AS (
    SELECT min(step) AS lo, max(step) AS hi, CAST(getvariable('drift_window') AS BIGINT) AS size
    FROM trajectories WHERE step IS NOT NULL
),
by_windows AS (
    SELECT CAST(i AS INTEGER) AS round, 'window' AS status, lo + i * size AS first_step,
           least(lo + (i + 1) * size - 1, hi) AS last_step, 'window' AS steps_from
    FROM bounds, range(0, coalesce(CAST(ceil((hi - lo + 1) / size) AS BIGINT), 0)) AS w(i)
    WHERE size >= 1
)
SELECT * FROM by_rounds WHERE getvariable('drift_window') IS NULL
UNION ALL
SELECT * FROM by_windows;
