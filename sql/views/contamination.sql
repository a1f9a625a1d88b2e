-- contamination: contamination_with() at the default threshold 0.8; one row per training task whose environment
-- has held-out tasks: its nearest held-out task and their similarity.
-- requires: contamination_with
CREATE OR REPLACE VIEW contamination AS SELECT * FROM contamination_with();
