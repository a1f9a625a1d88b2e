-- contamination_baseline: one row per environment with two or more held-out tasks (split 'eval'): how similar its
-- two closest distinct held-out tasks are, by the contamination gate's measure (the Jaccard index of their
-- task_words). A training task closer than that to a held-out task is closer than the held-out tasks are to each
-- other; the gate's default threshold (0.8) was set against this figure on the built-in environments.
--   env           the environment
--   tasks         its held-out tasks
--   highest       the highest similarity between two distinct ones
--   task_id       one of that pair (the smaller id; ties: the first pair by ids)
--   other_id      the other
--   at_or_above_0_8  pairs of distinct held-out tasks at or above the default threshold
-- requires: task_words
CREATE OR REPLACE VIEW contamination_baseline AS
WITH words AS (
    SELECT task_id, env, task_words(prompt, spec) AS words FROM tasks WHERE split = 'eval' AND env IS NOT NULL
),
pairs AS (
    SELECT a.env, a.task_id, b.task_id AS other_id,
           len(list_intersect(a.words, b.words))
           / greatest(len(a.words) + len(b.words) - len(list_intersect(a.words, b.words)), 1) AS similarity
    FROM words AS a JOIN words AS b ON a.env = b.env AND a.task_id < b.task_id
),
ranked AS (
    SELECT *, row_number() OVER (PARTITION BY env ORDER BY similarity DESC, task_id, other_id) AS rank,
           count(*) FILTER (WHERE similarity >= 0.8) OVER (PARTITION BY env) AS at_or_above_0_8
    FROM pairs
)
SELECT env, (SELECT count(*) FROM words AS w WHERE w.env = r.env) AS tasks, similarity AS highest, task_id, other_id,
       at_or_above_0_8
FROM ranked AS r
WHERE rank = 1;
