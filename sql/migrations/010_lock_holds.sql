-- 010_lock_holds: how long each writing open held the store's lock, so that a writer that keeps readers out
-- can be found. Rows are written only while $COEVOLVE_LOCK_HOLDS is set (bench/lock_bench.py sets it), so that
-- by default a unit of work leaves no trace beyond its own writes.
--
-- lock_holds: one row per writing open of the store, written by that open just before it closes.
--   hold_id      sequential id
--   command      the process that held it: its program and first argument ('coevolve-engine ingest', ...)
--   pid          its process id
--   waited       seconds the open waited for another process to release the lock
--   seconds      seconds from taking the lock to releasing it (the file's final checkpoint at close excluded)
--   released_at  when it released it (so it took it at released_at - seconds)
CREATE SEQUENCE hold_id_seq START 1;
CREATE TABLE lock_holds (
    hold_id     BIGINT PRIMARY KEY DEFAULT nextval('hold_id_seq'),
    command     VARCHAR NOT NULL,
    pid         BIGINT NOT NULL,
    waited      DOUBLE NOT NULL,
    seconds     DOUBLE NOT NULL,
    released_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
