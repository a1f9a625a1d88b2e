-- 001_core: the tables every part of the engine reads and writes.
--
-- tasks: one row per task the agent can be trained or evaluated on.
--   task_id    unique id of the task
--   env        environment that runs it (a name in the environment registry), NULL if unknown
--   prompt     the instruction shown to the agent (first user turn for multi-turn tasks)
--   spec       environment-specific JSON object: everything needed to start, run and score the task
--   source     where the task came from (e.g. 'bfcl:multi_turn_base', 'synthesized', 'sample')
--   meta       free JSON object
--   ingest_id  the ingests row that added it (NULL when added by the engine itself)
--   created_at when the row was written
CREATE TABLE tasks (
    task_id    VARCHAR PRIMARY KEY,
    env        VARCHAR,
    prompt     VARCHAR,
    spec       JSON,
    source     VARCHAR,
    meta       JSON,
    ingest_id  BIGINT,
    created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- trajectories: one row per rollout (one attempt of the agent at one task).
--   trajectory_id   unique id (given, or a hash of the record's content, so re-ingesting adds nothing)
--   task_id         the task attempted
--   step            training step (or round) that generated it; orders each task's history
--   group_id        rollouts of one task generated together (a GRPO group); default task_id || '@' || step
--   reward          terminal reward in [0, 1]
--   success         as recorded; NULL means "reward >= threshold", decided by each view's threshold
--   action_pattern  ordered tool names called, consecutive repeats collapsed, joined by '>';
--                   '' when the rollout called no tool, NULL when its actions were not recorded
--   actions         JSON list of {"name", "arguments"} in call order
--   messages        JSON list of OpenAI-style chat messages
--   policy          checkpoint id of the policy that generated it
--   meta            free JSON object (usage, errors, token entropy, ...)
--   ingest_id       the ingests row that added it (NULL when written by the engine itself)
CREATE TABLE trajectories (
    trajectory_id  VARCHAR NOT NULL,
    task_id        VARCHAR NOT NULL,
    step           BIGINT NOT NULL,
    group_id       VARCHAR NOT NULL,
    reward         DOUBLE NOT NULL CHECK (reward >= 0 AND reward <= 1),
    success        BOOLEAN,
    action_pattern VARCHAR,
    actions        JSON,
    messages       JSON,
    policy         VARCHAR,
    meta           JSON,
    ingest_id      BIGINT
);

-- rounds: one row per round of the co-evolution loop.
--   round        0, 1, 2, ...
--   status       'running' or 'finished'
--   policy       checkpoint the round trained from
--   config       JSON of the configuration the round ran with
--   started_at / finished_at
CREATE TABLE rounds (
    round       INTEGER PRIMARY KEY,
    status      VARCHAR NOT NULL DEFAULT 'running',
    policy      VARCHAR,
    config      JSON,
    started_at  TIMESTAMP NOT NULL DEFAULT current_timestamp,
    finished_at TIMESTAMP
);

-- ingests: one row per file (or dataset) ingested, accepted as a whole.
--   ingest_id  sequential id
--   kind       'tasks' or 'trajectories'
--   path       the file or directory as given
--   format     'jsonl', 'parquet' or 'dataset'
--   sha256     hash of the file's bytes (of the dataset's arrow files for a dataset)
--   records    records in the file
--   added      records that were new (the rest were already in the store)
--   ingested_at  when it was ingested
CREATE SEQUENCE ingest_id_seq START 1;
CREATE TABLE ingests (
    ingest_id BIGINT PRIMARY KEY DEFAULT nextval('ingest_id_seq'),
    kind      VARCHAR NOT NULL,
    path      VARCHAR NOT NULL,
    format    VARCHAR NOT NULL,
    sha256    VARCHAR,
    records   BIGINT NOT NULL,
    added     BIGINT NOT NULL,
    ingested_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
