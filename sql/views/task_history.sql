-- task_history: task_history_with() at the defaults w = 3, threshold = 0.5; one row per (task_id, step).
-- requires: task_history_with
CREATE OR REPLACE VIEW task_history AS SELECT * FROM task_history_with();
