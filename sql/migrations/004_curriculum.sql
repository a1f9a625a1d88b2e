-- 004_curriculum: the task distribution the trainer samples from, one versioned weight set per round.
--
-- weight_sets: one row per round's weight set (written in the same transaction as its task_weights rows).
--   round       the round the weights are for (0, 1, 2, ...)
--   strategy    the curriculum strategy that computed them ('uniform', 'coevolve', 'plr', 'dapo-filter', ...)
--   params      JSON object: {"strategy": the strategy's config, "signals": the signal constants used}
--   step        the latest scored training step the weights saw (NULL when the store had no rollouts)
--   tasks       tasks weighted (every row of tasks at the time)
--   nonzero     tasks with a weight above 0 (the ones a sampler can draw)
--   reason      why this round's weights differ from the previous round's, in words
--   created_at  when it was written
CREATE TABLE weight_sets (
    round      INTEGER PRIMARY KEY,
    strategy   VARCHAR NOT NULL,
    params     JSON NOT NULL,
    step       BIGINT,
    tasks      BIGINT NOT NULL,
    nonzero    BIGINT NOT NULL,
    reason     VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- task_weights: one row per (round, task): how much the task is drawn in that round.
--   round       the weight set (weight_sets.round)
--   task_id     the task
--   weight      its unnormalised weight, >= 0; a sampler draws it with probability weight / sum(weight)
--   components  JSON object: the terms that produced the weight (per strategy; e.g. coevolve's terms add up
--               to the weight)
--   strategy    the strategy that computed it (as in weight_sets)
CREATE TABLE task_weights (
    round      INTEGER NOT NULL,
    task_id    VARCHAR NOT NULL,
    weight     DOUBLE NOT NULL CHECK (weight >= 0),
    components JSON,
    strategy   VARCHAR NOT NULL,
    PRIMARY KEY (round, task_id)
);
