-- drift_turns: where the policy's episodes break, round by round. One row per (round, turn) where turn is a user
-- turn (1-based) that a scored rollout of one of the round's training steps reached (turn_outcomes summed over
-- the round's steps, drift_rounds).
--   round      the round
--   turn       the user turn
--   reached    rollouts of the round that reached this turn
--   failed     of those, rollouts whose episode first went wrong in this turn
--   fail_rate  failed / reached
-- requires: drift_rounds, turn_outcomes
CREATE OR REPLACE VIEW drift_turns AS
SELECT d.round, o.turn, CAST(sum(o.reached) AS BIGINT) AS reached, CAST(sum(o.failed) AS BIGINT) AS failed,
       sum(o.failed) / sum(o.reached) AS fail_rate
FROM drift_rounds AS d
JOIN turn_outcomes AS o ON o.step BETWEEN d.first_step AND d.last_step
GROUP BY d.round, o.turn;
