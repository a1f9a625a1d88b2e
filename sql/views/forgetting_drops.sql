-- forgetting_drops: forgetting_drops_with() at the defaults w = 3, threshold = 0.5; one row per forgetting event.
-- requires: forgetting_drops_with
CREATE OR REPLACE VIEW forgetting_drops AS SELECT * FROM forgetting_drops_with();
