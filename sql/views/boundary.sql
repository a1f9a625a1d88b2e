-- boundary: boundary_with() at the default threshold 0.5; one row per group with mixed outcomes.
-- requires: boundary_with
CREATE OR REPLACE VIEW boundary AS SELECT * FROM boundary_with();
