-- drift_patterns: one row per (round, pattern lineage): each failure pattern's share of its round, related
-- across rounds. Patterns are found afresh every round (ids '<round>-<cluster>' do not carry over), so a
-- pattern is related to the patterns of other rounds by its lineage: its dominant signal and the task of its
-- representative trajectory (the member closest to its centre), e.g. 'boundary:files-003'. Patterns of one
-- round with the same lineage are added up. A lineage present in the previous round with patterns and
-- absent now gets a row with size 0 and trend 'vanished'.
--   round               the round (one that has failure patterns)
--   lineage             dominant_signal || ':' || representative task (the pattern id when the
--                       representative trajectory is not in the store)
--   dominant_signal     the patterns' dominant signal
--   representative_task the task of the representative trajectory
--   patterns            patterns of the round in the lineage (0 when vanished)
--   pattern_ids         their ids
--   size                member trajectories
--   share               size / all members of the round's patterns
--   previous_share      its share in the previous round with patterns (0 when absent; NULL for the first)
--   trend               'new' (absent before), 'grew', 'shrank', 'steady' or 'vanished'
-- requires: (none)
CREATE OR REPLACE VIEW drift_patterns AS
WITH labelled AS (
    SELECT
        p.round,
        p.pattern_id,
        p.size,
        p.dominant_signal,
        t.task_id AS representative_task,
        p.dominant_signal || ':' || coalesce(t.task_id, p.pattern_id) AS lineage
    FROM failure_patterns AS p
    LEFT JOIN trajectories AS t ON t.trajectory_id = p.representative_trajectory
),
pattern_rounds AS (
    SELECT round, lag(round) OVER (ORDER BY round) AS previous_round, members
    FROM (SELECT round, sum(size) AS members FROM labelled GROUP BY round)
),
lineages AS (
    SELECT lineage, any_value(dominant_signal) AS dominant_signal, any_value(representative_task) AS representative_task
    FROM labelled GROUP BY lineage
),
grid AS (
    SELECT
        r.round,
        r.previous_round,
        l.lineage,
        l.dominant_signal,
        l.representative_task,
        count(p.pattern_id) AS patterns,
        list(p.pattern_id ORDER BY p.pattern_id) FILTER (WHERE p.pattern_id IS NOT NULL) AS pattern_ids,
        CAST(coalesce(sum(p.size), 0) AS BIGINT) AS size,
        coalesce(sum(p.size), 0) / any_value(r.members) AS share
    FROM pattern_rounds AS r
    CROSS JOIN lineages AS l
    LEFT JOIN labelled AS p ON p.round = r.round AND p.lineage = l.lineage
    GROUP BY ALL
),
compared AS (
    SELECT g.*, CASE WHEN g.previous_round IS NULL THEN NULL ELSE coalesce(b.share, 0) END AS previous_share
    FROM grid AS g
    LEFT JOIN grid AS b ON b.round = g.previous_round AND b.lineage = g.lineage
)
SELECT
    round,
    lineage,
    dominant_signal,
    representative_task,
    patterns,
    coalesce(pattern_ids, []) AS pattern_ids,
    size,
    share,
    previous_share,
    CASE
        WHEN size > 0 AND coalesce(previous_share, 0) = 0 THEN 'new'
        WHEN size = 0 THEN 'vanished'
        WHEN share > previous_share THEN 'grew'
        WHEN share < previous_share THEN 'shrank'
        ELSE 'steady'
    END AS trend
FROM compared
WHERE size > 0 OR previous_share > 0;
