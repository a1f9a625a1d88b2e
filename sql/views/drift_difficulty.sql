-- drift_difficulty: drift_difficulty_with() at the default threshold; one row per round (see that file).
-- requires: drift_difficulty_with
CREATE OR REPLACE VIEW drift_difficulty AS SELECT * FROM drift_difficulty_with();
