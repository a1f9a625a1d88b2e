-- pattern_steps: pattern_steps_with() at the defaults theta = 5, min_n = 50; one row per (action_pattern, step).
-- requires: pattern_steps_with
CREATE OR REPLACE VIEW pattern_steps AS SELECT * FROM pattern_steps_with();
