-- task_steps: task_steps_with() at the default threshold 0.5; one row per (task_id, step).
-- requires: task_steps_with
CREATE OR REPLACE VIEW task_steps AS SELECT * FROM task_steps_with();
