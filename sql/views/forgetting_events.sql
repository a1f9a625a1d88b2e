-- forgetting_events: forgetting_events_with() at the default threshold 0.5; one row per scored task.
-- requires: forgetting_events_with
CREATE OR REPLACE VIEW forgetting_events AS SELECT * FROM forgetting_events_with();
