-- 005_run: what `coevolve-engine run` has done, so a killed run resumes at the first unfinished phase.
--
-- rounds (from 001_core) gains:
--   first_step  the first training step of the round (its steps are first_step .. first_step + F - 1)
--   checkpoint  the policy checkpoint the round's training wrote (the next round trains from it)
ALTER TABLE rounds ADD COLUMN first_step BIGINT;
ALTER TABLE rounds ADD COLUMN checkpoint VARCHAR;

-- run_phases: one row per (round, phase) that a run has started.
--   round        the round (rounds.round)
--   phase        'bootstrap' (round 0 only, when configured), 'weights', 'warmup' (round 0 only, when
--                configured), 'train', 'eval', 'signals', 'patterns', 'synthesize', 'validate', in that order
--                (engine/loop/phases.py declares them)
--   status       'running' while it is under way (or when the process died in it), 'finished' once its
--                outputs are committed; a phase's outputs and its 'finished' are written in one transaction
--   attempts     how many times the phase was started (more than 1: it was resumed after an interruption)
--   started_at   when the latest attempt started
--   finished_at  when it finished (NULL while running)
--   seconds      how long the finishing attempt took
--   outputs      JSON object: what the phase produced (counts, checkpoint, ...), as printed by `run`
CREATE TABLE run_phases (
    round       INTEGER NOT NULL,
    phase       VARCHAR NOT NULL,
    status      VARCHAR NOT NULL CHECK (status IN ('running', 'finished')),
    attempts    INTEGER NOT NULL DEFAULT 1,
    started_at  TIMESTAMP NOT NULL DEFAULT current_timestamp,
    finished_at TIMESTAMP,
    seconds     DOUBLE,
    outputs     JSON,
    PRIMARY KEY (round, phase)
);
