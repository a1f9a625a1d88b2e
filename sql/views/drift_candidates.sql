-- drift_candidates: one row per (round, signal) of candidate tasks: how many each round's synthesis made
-- and what became of them.
--   round      the round that made them
--   signal     the dominant signal of the pattern they target (NULL for unguided candidates)
--   candidates candidates made
--   accepted / rejected / pending   by verdict
--   acceptance accepted / (accepted + rejected) (NULL while none is decided)
--   patterns   distinct failure patterns they came from
-- requires: (none)
CREATE OR REPLACE VIEW drift_candidates AS
SELECT
    round,
    signal,
    count(*) AS candidates,
    count(*) FILTER (WHERE verdict = 'accepted') AS accepted,
    count(*) FILTER (WHERE verdict = 'rejected') AS rejected,
    count(*) FILTER (WHERE verdict = 'pending') AS pending,
    CASE WHEN count(*) FILTER (WHERE verdict IN ('accepted', 'rejected')) > 0
         THEN count(*) FILTER (WHERE verdict = 'accepted')
              / count(*) FILTER (WHERE verdict IN ('accepted', 'rejected')) END AS acceptance,
    count(DISTINCT pattern_id) AS patterns
FROM candidates
GROUP BY round, signal;
