-- drift_eval_similarity: one row per (round, similarity bin) of the candidates whose similarity to the held-out
-- tasks was measured (candidates.eval_similarity, the highest cosine similarity of a candidate's prompt to its
-- environment's eval task prompts): how much of each round's synthesis lands near the eval set, and how much of
-- that was accepted (the paper bins synthesis by it). Candidates never measured (pending, no eval tasks in their
-- environment, no prompt) are left out.
--   round       the round that made them
--   bin         '[-1, 0.5)', '[0.5, 0.7)', '[0.7, 0.9)' or '[0.9, 1]' (a similarity rounded above 1 counts in
--               the last)
--   bin_low     the bin's lower edge (-1, 0.5, 0.7, 0.9)
--   candidates  candidates in the bin
--   accepted / rejected   by verdict
--   acceptance  accepted / (accepted + rejected) (NULL while none is decided)
--   share       candidates / the round's measured candidates
--   max_similarity  the highest eval_similarity in the bin
-- requires: (none)
CREATE OR REPLACE VIEW drift_eval_similarity AS
WITH binned AS (
    SELECT round, verdict, eval_similarity,
           CAST(CASE WHEN eval_similarity < 0.5 THEN -1.0 WHEN eval_similarity < 0.7 THEN 0.5
                     WHEN eval_similarity < 0.9 THEN 0.7 ELSE 0.9 END AS DOUBLE) AS bin_low
    FROM candidates
    WHERE eval_similarity IS NOT NULL
)
SELECT
    round,
    CASE bin_low WHEN -1.0 THEN '[-1, 0.5)' WHEN 0.5 THEN '[0.5, 0.7)' WHEN 0.7 THEN '[0.7, 0.9)'
                 ELSE '[0.9, 1]' END AS bin,
    bin_low,
    count(*) AS candidates,
    count(*) FILTER (WHERE verdict = 'accepted') AS accepted,
    count(*) FILTER (WHERE verdict = 'rejected') AS rejected,
    CASE WHEN count(*) FILTER (WHERE verdict IN ('accepted', 'rejected')) > 0
         THEN count(*) FILTER (WHERE verdict = 'accepted')
              / count(*) FILTER (WHERE verdict IN ('accepted', 'rejected')) END AS acceptance,
    count(*) / sum(count(*)) OVER (PARTITION BY round) AS share,
    max(eval_similarity) AS max_similarity
FROM binned
GROUP BY round, bin_low;
