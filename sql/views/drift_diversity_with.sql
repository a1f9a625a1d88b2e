-- drift_diversity_with(k := 5, embedding_model := 'all-MiniLM-L6-v2'): one row per round with a task set:
-- the diversity of its tasks' prompts as the CoEvolve paper measures it (docs/architecture.md, "The paper's
-- protocol and measures"), over the prompt embeddings cached in `embeddings` (text_hash = sha256 of the
-- prompt; `coevolve-engine drift` embeds the missing ones). Tasks without a prompt or a cached vector are left
-- out (see `embedded`).
--   round           the round (drift_task_sets)
--   tasks           tasks in its set
--   embedded        of them, tasks with a prompt embedding: the set Y measured
--   sr_at_k         self-redundancy SR@k = (1/|Y|) sum_i (1/k) sum_{j in kNN(i)} cos(y_i, y_j): the mean
--                   cosine similarity of each task to its k nearest other tasks (k' = |Y| - 1 when the set
--                   has k or fewer tasks; NULL below 2 tasks). Lower is more diverse.
--   previous_round  the previous round with a task set: its set is the target X of ed_rel
--   ed_rel          relative energy distance of this round's set Y to the previous round's set X:
--                   ED(X, Y) = 2 mean_ij |x_i - y_j| - mean_ii' |x_i - x_i'| - mean_jj' |y_j - y_j'| (all pairs,
--                   i = i' included, Euclidean), ED_rel = ED(X, Y) / mean_{i != i'} |x_i - x_i'|; 0 for equal
--                   sets. NULL for the first round, or when X has fewer than 2 tasks.
-- requires: drift_task_sets
CREATE OR REPLACE MACRO drift_diversity_with(k := 5, embedding_model := 'all-MiniLM-L6-v2') AS TABLE
WITH set_sizes AS (
    SELECT round, count(*) AS tasks, any_value(previous_round) AS previous_round FROM drift_task_sets GROUP BY round
),
vectors AS MATERIALIZED (
    SELECT s.round, s.task_id, e.vector
    FROM drift_task_sets AS s
    JOIN tasks AS t USING (task_id)
    JOIN embeddings AS e ON e.text_hash = sha256(t.prompt) AND e.model = embedding_model
    WHERE t.prompt IS NOT NULL
),
pairs AS MATERIALIZED (
    SELECT a.round, a.task_id, list_cosine_similarity(a.vector, b.vector) AS similarity,
           list_distance(a.vector, b.vector) AS distance
    FROM vectors AS a
    JOIN vectors AS b ON a.round = b.round AND a.task_id <> b.task_id
),
redundancy AS (
    SELECT round, avg(task_redundancy) AS sr_at_k
    FROM (
        SELECT round, task_id, avg(similarity) AS task_redundancy
        FROM (SELECT *, row_number() OVER (PARTITION BY round, task_id ORDER BY similarity DESC) AS rank FROM pairs)
        WHERE rank <= k
        GROUP BY round, task_id
    )
    GROUP BY round
),
within AS (
    -- sum over ordered pairs i != i' of |x_i - x_i'|, and the set's size n (the i = i' pairs add 0)
    SELECT v.round, count(*) AS n,
           (SELECT coalesce(sum(p.distance), 0) FROM pairs AS p WHERE p.round = v.round) AS distance_sum
    FROM vectors AS v
    GROUP BY v.round
),
across AS (
    SELECT y.round, avg(list_distance(x.vector, y.vector)) AS mean_distance
    FROM vectors AS y
    JOIN set_sizes AS z ON z.round = y.round
    JOIN vectors AS x ON x.round = z.previous_round
    GROUP BY y.round
)
SELECT
    z.round,
    z.tasks,
    coalesce(wy.n, 0) AS embedded,
    r.sr_at_k,
    z.previous_round,
    CASE WHEN wx.n >= 2 THEN
        (2 * a.mean_distance - wx.distance_sum / (wx.n * wx.n) - wy.distance_sum / (wy.n * wy.n))
        / (wx.distance_sum / (wx.n * (wx.n - 1)))
    END AS ed_rel
FROM set_sizes AS z
LEFT JOIN redundancy AS r USING (round)
LEFT JOIN within AS wy ON wy.round = z.round
LEFT JOIN within AS wx ON wx.round = z.previous_round
LEFT JOIN across AS a ON a.round = z.round;
