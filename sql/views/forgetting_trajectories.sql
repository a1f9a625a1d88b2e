-- forgetting_trajectories: forgetting_trajectories_with() at the defaults w = 3, threshold = 0.5; one row per
-- trajectory where per-trajectory forgetting fires.
-- requires: forgetting_trajectories_with
CREATE OR REPLACE VIEW forgetting_trajectories AS SELECT * FROM forgetting_trajectories_with();
