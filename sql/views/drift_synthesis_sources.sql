-- drift_synthesis_sources: one row per (round, source signal, source pattern) of the synthesized tasks in a
-- round's task set: where the round's synthesized tasks came from (the accepted candidates they were).
--   round          the round whose task set holds them
--   signal         the dominant signal of the pattern the candidate was made for (NULL: no candidate row,
--                  e.g. a task ingested with source 'synthesized')
--   pattern_id     that failure pattern (NULL likewise, or for unguided candidates)
--   made_in_round  the round that made the candidate
--   tasks          synthesized tasks in the set from that pattern
--   share          tasks / all tasks in the round's set
-- requires: drift_task_sets
CREATE OR REPLACE VIEW drift_synthesis_sources AS
WITH sized AS (SELECT round, count(*) AS set_size FROM drift_task_sets GROUP BY round)
SELECT
    s.round,
    c.signal,
    c.pattern_id,
    c.round AS made_in_round,
    count(*) AS tasks,
    count(*) / any_value(z.set_size) AS share
FROM drift_task_sets AS s
JOIN sized AS z USING (round)
LEFT JOIN (SELECT * FROM candidates WHERE verdict = 'accepted' AND task_id IS NOT NULL) AS c
    ON c.task_id = s.task_id
WHERE s.synthesized
GROUP BY s.round, c.signal, c.pattern_id, c.round;
