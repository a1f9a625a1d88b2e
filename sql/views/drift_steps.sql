-- drift_steps: drift_steps_with() at the default threshold; one row per step (see that file).
-- requires: drift_steps_with
CREATE OR REPLACE VIEW drift_steps AS SELECT * FROM drift_steps_with();
