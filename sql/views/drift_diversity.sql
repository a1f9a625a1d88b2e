-- drift_diversity: drift_diversity_with() at k 5 and all-MiniLM-L6-v2; one row per round (see that file).
-- requires: drift_diversity_with
CREATE OR REPLACE VIEW drift_diversity AS SELECT * FROM drift_diversity_with();
