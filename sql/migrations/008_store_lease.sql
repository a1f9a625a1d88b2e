-- 008_store_lease: who is running a long job on the store, so that a second one refuses instead of undoing it,
-- and where each stored record came from, so that a conflicting record can be traced to its file and line.
--
-- store_lease: at most one row, held by the process that runs `run`, `demo`, `bootstrap` or another long writer.
--   holder        'lease' (the primary key: there is one lease per store)
--   command       what holds it ('run', 'demo', 'bootstrap', ...)
--   pid           the holder's process id
--   host          the holder's host name
--   process_start the holder's start time as the operating system records it (Linux: clock ticks since boot),
--                 so that a new process that reuses a dead holder's pid is not taken for it; NULL where unknown
--   acquired_at   when the lease was taken
--   heartbeat_at  the last time the holder started a unit of work (a phase of `run`)
-- A lease whose process is gone (same host, pid not running or started at another time) is taken over by the
-- next long writer, which then cleans up what the dead one left half done.
CREATE TABLE store_lease (
    holder        VARCHAR PRIMARY KEY DEFAULT 'lease' CHECK (holder = 'lease'),
    command       VARCHAR NOT NULL,
    pid           BIGINT NOT NULL,
    host          VARCHAR NOT NULL,
    process_start BIGINT,
    acquired_at   TIMESTAMP NOT NULL DEFAULT current_timestamp,
    heartbeat_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- ingest_line: the line (JSON lines), row (Parquet, datasets) or record (in-memory records) each record had in
-- the file its ingest (ingest_id -> ingests.path) read; NULL for records stored before this migration.
ALTER TABLE tasks ADD COLUMN ingest_line BIGINT;
ALTER TABLE trajectories ADD COLUMN ingest_line BIGINT;
