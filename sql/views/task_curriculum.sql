-- task_curriculum: task_curriculum_with() at the defaults; one row per row of tasks (see that file).
-- requires: task_curriculum_with
CREATE OR REPLACE VIEW task_curriculum AS SELECT * FROM task_curriculum_with();
