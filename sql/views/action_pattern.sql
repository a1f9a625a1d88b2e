-- action_pattern(actions): scalar macro. The action pattern of a JSON list of {"name", "arguments"} calls:
-- the tool names in call order, consecutive repeats collapsed, joined by '>'. '' for an empty list,
-- NULL when actions is NULL. Example: [a, a, b, a] -> 'a>b>a'. The store computes trajectories.action_pattern
-- with this definition when it ingests a trajectory.
-- requires: action_pattern_from_names
CREATE OR REPLACE MACRO action_pattern(actions) AS (
    action_pattern_from_names(json_extract_string(actions, '$[*].name'))
);
