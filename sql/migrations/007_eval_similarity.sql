-- 007_eval_similarity: how close each candidate task comes to the held-out (eval) tasks.
--
-- candidates.eval_similarity  the highest cosine similarity of the candidate's prompt embedding to the prompts of
--                             its environment's eval tasks (tasks.split 'eval'), written with its verdict whatever
--                             the verdict. A measure, never a check: novelty compares a candidate with the training
--                             tasks only, so a candidate close to an eval task is kept, and this column says how
--                             close (the paper bins synthesis by it; see the drift_eval_similarity view). NULL
--                             while pending, when its environment has no eval tasks, or when it has no prompt.
ALTER TABLE candidates ADD COLUMN eval_similarity DOUBLE;
