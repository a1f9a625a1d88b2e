-- task_group_health: task_group_health_with() at the default threshold 0.5; one row per task.
-- requires: task_group_health_with
CREATE OR REPLACE VIEW task_group_health AS SELECT * FROM task_group_health_with();
