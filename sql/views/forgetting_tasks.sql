-- forgetting_tasks: forgetting_tasks_with() at the defaults w = 3, threshold = 0.5; one row per task that forgot,
-- ranked by what it lost.
-- requires: forgetting_tasks_with
CREATE OR REPLACE VIEW forgetting_tasks AS SELECT * FROM forgetting_tasks_with();
