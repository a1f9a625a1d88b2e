-- drift_eval_steps: drift_eval_steps_with() at the default signal constants; one row per step (see that file).
-- requires: drift_eval_steps_with
CREATE OR REPLACE VIEW drift_eval_steps AS SELECT * FROM drift_eval_steps_with();
