-- group_outcomes: group_outcomes_with() at the default threshold 0.5; one row per group.
-- requires: group_outcomes_with
CREATE OR REPLACE VIEW group_outcomes AS SELECT * FROM group_outcomes_with();
