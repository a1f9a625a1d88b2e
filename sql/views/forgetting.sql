-- forgetting: forgetting_with() at the defaults w = 3, threshold = 0.5; one row per (task_id, step) where it fires.
-- requires: forgetting_with
CREATE OR REPLACE VIEW forgetting AS SELECT * FROM forgetting_with();
