-- round_costs: one row per round of `coevolve-engine run` (from run_phases): what its training took, and what
-- the engine's feedback loop around it took, for comparison with the paper (feedback time as a share of
-- training time: +9.67% on AppWorld, +12.76% on BFCL).
--   round             the round
--   status            'finished' when every phase of the round that started has finished, else 'running'
--   training_seconds  the trainer's time: the 'train' phase, less the seconds its store sink spent writing
--                     rollouts to the store (run_phases.outputs.store_seconds)
--   store_seconds     those sink seconds (store opens and writes during training)
--   feedback_seconds  everything else the round took (weights, eval, signals, patterns, synthesize, validate,
--                     the sink's store seconds and the run's own bookkeeping between its phases): the round's
--                     span (its first phase's start to its last phase's finish) less training_seconds and
--                     warmup_seconds. A round with a phase that was started more than once (a resumed run) is
--                     measured by its finishing attempts' seconds instead
--   feedback_share    feedback_seconds / training_seconds (0.0967 is the paper's +9.67%); NULL without training
--   warmup_seconds    round 0's supervised warm-up ('warmup' phase), a one-off counted in neither; 'bootstrap'
--                     (the initial task set) is left out too
--   measured_by       'span' or 'phases' (a resumed round: the sum of its phases' seconds)
-- requires: (none)
CREATE OR REPLACE VIEW round_costs AS
WITH phases AS (
    SELECT round, phase, status, attempts, started_at, finished_at, coalesce(seconds, 0) AS seconds,
           CASE WHEN phase = 'train'
                THEN coalesce(TRY_CAST(json_extract(outputs, '$.store_seconds') AS DOUBLE), 0) ELSE 0 END
               AS store_seconds
    FROM run_phases
    WHERE phase <> 'bootstrap'
),
rounds_of AS (
    SELECT round,
           CASE WHEN bool_and(status = 'finished') THEN 'finished' ELSE 'running' END AS status,
           coalesce(sum(seconds) FILTER (WHERE phase = 'train'), 0) - sum(store_seconds) AS training_seconds,
           sum(store_seconds) AS store_seconds,
           coalesce(sum(seconds) FILTER (WHERE phase = 'warmup'), 0) AS warmup_seconds,
           max(attempts) = 1 AND bool_and(status = 'finished') AS once,
           CASE WHEN max(attempts) = 1 AND bool_and(status = 'finished')
                THEN epoch(max(finished_at) - min(started_at)) ELSE sum(seconds) END AS total_seconds
    FROM phases
    GROUP BY round
)
SELECT round, status, training_seconds, store_seconds,
       total_seconds - warmup_seconds - training_seconds AS feedback_seconds,
       CASE WHEN training_seconds > 0 THEN (total_seconds - warmup_seconds - training_seconds) / training_seconds END
           AS feedback_share,
       warmup_seconds,
       CASE WHEN once THEN 'span' ELSE 'phases' END AS measured_by
FROM rounds_of;
