-- rare_trajectories: rare_trajectories_with() at the defaults theta = 5, min_n = 50; one row per rare trajectory.
-- requires: rare_trajectories_with
CREATE OR REPLACE VIEW rare_trajectories AS SELECT * FROM rare_trajectories_with();
