-- flagged_trajectories: flagged_trajectories_with() at the defaults; one row per (trajectory_id, signal).
-- requires: flagged_trajectories_with
CREATE OR REPLACE VIEW flagged_trajectories AS SELECT * FROM flagged_trajectories_with();
