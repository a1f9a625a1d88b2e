-- group_health: group_health_with() at the default threshold 0.5; one row per training step.
-- requires: group_health_with
CREATE OR REPLACE VIEW group_health AS SELECT * FROM group_health_with();
