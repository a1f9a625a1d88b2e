-- task_signals: task_signals_with() at the defaults; one row per task.
-- requires: task_signals_with
CREATE OR REPLACE VIEW task_signals AS SELECT * FROM task_signals_with();
