-- A round's index is unique within its execution. Round creation is one
-- `INSERT ... ON CONFLICT DO NOTHING` that relies on this index and the primary key
-- (it used to take an advisory lock per execution and check with `NOT EXISTS`, so no
-- stored execution has two rounds at one index).
DROP INDEX m3rs_rounds_by_index;
CREATE UNIQUE INDEX m3rs_rounds_by_index ON m3rs_rounds (execution_id, round_index);
