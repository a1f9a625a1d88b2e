-- action_pattern_from_names(names): scalar macro. The action pattern of a list of tool names in call order:
-- consecutive repeats collapsed, joined by '>'. ['a', 'a', 'b', 'a'] -> 'a>b>a'; [] -> ''; NULL -> NULL.
-- requires: (none)
CREATE OR REPLACE MACRO action_pattern_from_names(names) AS (
    array_to_string(list_filter(names, lambda name, i: i = 1 OR name IS DISTINCT FROM names[i - 1]), '>')
);
