-- 003_synthesis: from flagged trajectories to failure patterns, LLM calls, candidate tasks and their verdicts.
--
-- embeddings: one row per embedded text, cached by content, so a text is embedded once per model.
--   text_hash   sha256 of the text
--   model       the embedding model (name or path)
--   dim         length of the vector
--   vector      the embedding (FLOAT[])
--   created_at  when it was computed
CREATE TABLE embeddings (
    text_hash  VARCHAR NOT NULL,
    model      VARCHAR NOT NULL,
    dim        INTEGER NOT NULL,
    vector     FLOAT[] NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (text_hash, model)
);

-- failure_patterns: one row per cluster of flagged trajectories found in a round.
--   pattern_id                 '<round>-<cluster>', unique
--   round                      the round that found it
--   step                       the latest training step whose flagged trajectories were clustered
--   cluster                    the cluster's number within the round (0, 1, ...)
--   size                       member trajectories
--   dominant_signal            the signal most members carry ('forgetting', 'boundary' or 'rare')
--   signal_counts              JSON object: members carrying each signal
--   representative_trajectory  the member closest to the cluster's centre
--   summary                    JSON object from the pattern's LLM summary (NULL until summarised)
--   summary_error              why summarising failed after its retries (NULL otherwise)
--   params                     JSON object: how the patterns were found (signal constants, model, k, seed)
--   created_at                 when it was written
CREATE TABLE failure_patterns (
    pattern_id                VARCHAR PRIMARY KEY,
    round                     INTEGER NOT NULL,
    step                      BIGINT,
    cluster                   INTEGER NOT NULL,
    size                      INTEGER NOT NULL,
    dominant_signal           VARCHAR NOT NULL,
    signal_counts             JSON NOT NULL,
    representative_trajectory VARCHAR,
    summary                   JSON,
    summary_error             VARCHAR,
    params                    JSON,
    created_at                TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- pattern_members: one row per (pattern, trajectory).
--   pattern_id     the pattern
--   trajectory_id  a flagged trajectory in it
--   signals        the signals the trajectory carries (VARCHAR[])
--   distance       cosine distance from the pattern's centre
--   text_hash      the embedded text (embeddings.text_hash)
CREATE TABLE pattern_members (
    pattern_id    VARCHAR NOT NULL,
    trajectory_id VARCHAR NOT NULL,
    signals       VARCHAR[] NOT NULL,
    distance      DOUBLE,
    text_hash     VARCHAR,
    PRIMARY KEY (pattern_id, trajectory_id)
);

-- llm_calls: one row per LLM request the engine made or answered from this table.
--   call_id            sequential id
--   purpose            what it was for ('summary', 'exploration', 'abstraction', 'judge', ...)
--   model              the litellm model string
--   prompt_version     the prompt file and its version, e.g. 'summary@1'
--   request_hash       sha256 of the canonical request (model, messages, tools, parameters)
--   request            the request as JSON
--   response           the response as JSON (NULL on error)
--   prompt_tokens / completion_tokens / cost / latency_s
--   error              what went wrong (NULL on success)
--   cached             true when answered from an earlier identical request in this table
--   created_at         when
CREATE SEQUENCE llm_call_id_seq START 1;
CREATE TABLE llm_calls (
    call_id           BIGINT PRIMARY KEY DEFAULT nextval('llm_call_id_seq'),
    purpose           VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    prompt_version    VARCHAR,
    request_hash      VARCHAR NOT NULL,
    request           JSON NOT NULL,
    response          JSON,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    cost              DOUBLE,
    latency_s         DOUBLE,
    error             VARCHAR,
    cached            BOOLEAN NOT NULL DEFAULT false,
    created_at        TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- candidates: one row per synthesized candidate task, kept whatever its verdict.
--   candidate_id    unique id
--   round           the round that made it
--   pattern_id      the failure pattern it targets (NULL for unguided bootstrapping)
--   signal          the pattern's dominant signal
--   env             the environment it is for
--   synthesizer     what made it ('offline:bfcl', 'llm', ...)
--   prompt          the task's first user message
--   spec            the task spec in the environment's format (JSON)
--   verdict         'pending', 'accepted' or 'rejected'
--   reason          the first failing check, or 'accepted'
--   checks          JSON list of {"check", "passed", "detail"} in the order they ran
--   novelty         highest embedding similarity to existing tasks and earlier candidates
--   success_rate    the validating agent's success rate on it (NULL if not attempted)
--   task_id         the task it became, when accepted
--   provenance      JSON: models, prompt versions, seed, parent tasks
--   created_at      when
CREATE TABLE candidates (
    candidate_id VARCHAR PRIMARY KEY,
    round        INTEGER,
    pattern_id   VARCHAR,
    signal       VARCHAR,
    env          VARCHAR NOT NULL,
    synthesizer  VARCHAR NOT NULL,
    prompt       VARCHAR,
    spec         JSON,
    verdict      VARCHAR NOT NULL DEFAULT 'pending',
    reason       VARCHAR,
    checks       JSON,
    novelty      DOUBLE,
    success_rate DOUBLE,
    task_id      VARCHAR,
    provenance   JSON,
    created_at   TIMESTAMP NOT NULL DEFAULT current_timestamp
);
