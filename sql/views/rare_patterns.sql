-- rare_patterns: rare_patterns_with() at the defaults theta = 5, min_n = 50; one row per action pattern.
-- requires: rare_patterns_with
CREATE OR REPLACE VIEW rare_patterns AS SELECT * FROM rare_patterns_with();
