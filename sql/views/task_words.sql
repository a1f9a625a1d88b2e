-- task_words(prompt, spec): what the contamination gate compares two tasks by: the words of every user turn (the
-- prompt, and the content of each message in spec.turns when the spec has them, as BFCL's do), lower-cased, with
-- their literals masked, plus each literal keyed by the word before it. A literal is a quoted name ('report.pdf'),
-- an identifier with a separator (final_report.txt, card_6789) or any word holding a digit (3, 2026, abc123);
-- 'add 4' gives the word 'add' and the literal 'add=4'. A set: sentence order, repeats and spacing do not count,
-- and a changed number or name changes one literal of the set. Returns the distinct features, sorted
-- (VARCHAR[]; literals are the entries holding '=', quotes dropped). Two tasks' similarity is the Jaccard index of their sets
-- (see contamination_with).
-- requires: (none)
CREATE OR REPLACE MACRO task_words(prompt, spec) AS (
    WITH source AS (
        SELECT lower(concat_ws(' ', prompt,
                               array_to_string(json_extract_string(spec, '$.turns[*][*].content'), ' '))) AS text
    ),
    literal AS (
        SELECT $$"[^"\s]+"|'[^'\s]+'|\w+(?:[_./-]\w+)+|\w*\d\w*$$ AS pattern
    )
    SELECT list_sort(list_distinct(list_concat(
        regexp_extract_all(regexp_replace(text, pattern, ' ', 'g'), '[a-z]+'),
        list_transform(regexp_extract_all(text, '(?:[a-z]+\s+)?(?:' || pattern || ')'),
                       lambda found: regexp_replace(regexp_replace(trim(found), '\s+', '='), '[''"]', '', 'g'))
    )))
    FROM source, literal
);
