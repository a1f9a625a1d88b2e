-- run_rounds: run_rounds_with() at the default signal constants; one row per round of `coevolve-engine run`.
-- requires: run_rounds_with
CREATE OR REPLACE VIEW run_rounds AS SELECT * FROM run_rounds_with();
