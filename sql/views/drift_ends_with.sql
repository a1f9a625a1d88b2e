-- drift_ends_with(threshold := 0.5): the first and the last round (or step window) of drift_rounds that have
-- scored rollouts, compared like with like: over the tasks scored in both. Two rows (one when the two are the
-- same round); none without scored rollouts. A report's headline over steps reads its training success here.
--   end            'first' or 'last'
--   round          the round (or window) at that end
--   first_step     its first step
--   last_step      its last step
--   tasks          tasks scored in it
--   shared_tasks   of them, tasks scored at both ends: the rest of the row is over these
--   rollouts       their scored rollouts in it
--   successes      of them, successes (success as recorded, else reward >= threshold)
--   success_rate   successes / rollouts (NULL when no task is shared)
--   mean_reward    their mean reward, rounded to 9 decimals
-- requires: drift_rounds, task_steps_with
CREATE OR REPLACE MACRO drift_ends_with(threshold := 0.5) AS TABLE
WITH scored AS (
    SELECT r.round, r.first_step, r.last_step, s.task_id, s.rollouts, s.successes, s.score * s.rollouts AS reward_sum
    FROM drift_rounds AS r
    JOIN task_steps_with(threshold := threshold) AS s ON s.step BETWEEN r.first_step AND r.last_step
),
ends AS (
    SELECT 'first' AS "end", min(round) AS round FROM scored
    UNION ALL
    SELECT 'last', max(round) FROM scored WHERE (SELECT min(round) FROM scored) < (SELECT max(round) FROM scored)
),
shared AS (
    SELECT task_id FROM scored WHERE round = (SELECT min(round) FROM scored)
    INTERSECT
    SELECT task_id FROM scored WHERE round = (SELECT max(round) FROM scored)
)
SELECT
    e."end",
    e.round,
    any_value(s.first_step) AS first_step,
    any_value(s.last_step) AS last_step,
    count(DISTINCT s.task_id) AS tasks,
    count(DISTINCT s.task_id) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared)) AS shared_tasks,
    CAST(coalesce(sum(s.rollouts) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared)), 0) AS BIGINT) AS rollouts,
    CAST(coalesce(sum(s.successes) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared)), 0) AS BIGINT)
        AS successes,
    sum(s.successes) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared))
        / sum(s.rollouts) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared)) AS success_rate,
    round(sum(s.reward_sum) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared))
          / sum(s.rollouts) FILTER (WHERE s.task_id IN (SELECT task_id FROM shared)), 9) AS mean_reward
FROM ends AS e
JOIN scored AS s USING (round)
GROUP BY e."end", e.round;
