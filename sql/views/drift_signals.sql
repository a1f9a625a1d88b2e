-- drift_signals: drift_signals_with() at the default signal constants; one row per round (see that file).
-- requires: drift_signals_with
CREATE OR REPLACE VIEW drift_signals AS SELECT * FROM drift_signals_with();
