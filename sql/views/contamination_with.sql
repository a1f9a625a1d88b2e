-- contamination_with(threshold := 0.8): one row per training task (split 'train') whose environment has held-out
-- tasks (split 'eval'): its nearest held-out task and how similar the two are, so a store made anywhere can be
-- audited for training tasks that copy a held-out one with other numbers, other names or its sentences reordered.
-- Similarity is the Jaccard index of the two tasks' task_words (masked words plus keyed literals of every user
-- turn): 1 when they say the same things, whatever the order; the validation gate refuses a candidate at the
-- same measure (validation.contamination_threshold).
--   task_id           the training task
--   env               its environment
--   source            where it came from (tasks.source: 'synthesized', an ingest's source, ...)
--   held_out_task_id  its nearest held-out task of the same environment (ties: the smallest id)
--   similarity        their Jaccard index, in [0, 1]
--   contaminated      similarity >= threshold
-- requires: task_words
CREATE OR REPLACE MACRO contamination_with(threshold := 0.8) AS TABLE
WITH words AS (
    SELECT task_id, env, source, split, task_words(prompt, spec) AS words
    FROM tasks
    WHERE split IN ('train', 'eval') AND env IS NOT NULL
),
pairs AS (
    SELECT t.task_id, t.env, t.source, h.task_id AS held_out_task_id,
           len(list_intersect(t.words, h.words))
           / greatest(len(t.words) + len(h.words) - len(list_intersect(t.words, h.words)), 1) AS similarity
    FROM words AS t
    JOIN words AS h ON h.env = t.env AND h.split = 'eval'
    WHERE t.split = 'train'
)
SELECT task_id, env, source, held_out_task_id, similarity, similarity >= threshold AS contaminated
FROM pairs
QUALIFY row_number() OVER (PARTITION BY task_id ORDER BY similarity DESC, held_out_task_id) = 1;
