-- Cursors are given by readers, not by writers under a lock.
--
-- 0003 numbered each record at COMMIT under a transaction-level advisory lock. That lock is
-- held until the commit is durable, so concurrent writers flushed the WAL one after another
-- instead of together: with synchronous_commit on, 8 concurrent round writes went from about
-- 3,000 to about 400 per second (docs/changes.md). Now a writer only appends its record,
-- unnumbered (`cursor IS NULL`), with plain row triggers and no lock. A reader first calls
-- m3rs_number_changes(), which numbers every committed unnumbered record under the
-- advisory lock, in the order they were appended, above every cursor already given, and
-- commits. A record is numbered only once it is committed and visible, and each numbering
-- commits before the next may start, so a cursor is never given below one a reader could
-- already have read: `cursor > last` resumes exactly.

DROP TRIGGER m3rs_changes_round_created ON m3rs_rounds;
DROP TRIGGER m3rs_changes_round_status ON m3rs_rounds;
DROP TRIGGER m3rs_changes_execution_created ON m3rs_executions;
DROP TRIGGER m3rs_changes_execution_updated ON m3rs_executions;

ALTER TABLE m3rs_changes DROP CONSTRAINT m3rs_changes_pkey;
ALTER TABLE m3rs_changes ALTER COLUMN cursor DROP NOT NULL;
-- The order records were appended in; it orders the records one numbering finds.
ALTER TABLE m3rs_changes ADD COLUMN appended bigint;
UPDATE m3rs_changes SET appended = cursor;
CREATE SEQUENCE m3rs_change_appended AS bigint MINVALUE 1;
SELECT setval('m3rs_change_appended', coalesce((SELECT max(appended) FROM m3rs_changes), 0) + 1,
              false);
ALTER TABLE m3rs_changes ALTER COLUMN appended SET DEFAULT nextval('m3rs_change_appended'),
                         ALTER COLUMN appended SET NOT NULL;
CREATE UNIQUE INDEX m3rs_changes_by_cursor ON m3rs_changes (cursor) WHERE cursor IS NOT NULL;
CREATE INDEX m3rs_changes_unnumbered ON m3rs_changes (appended) WHERE cursor IS NULL;
DROP SEQUENCE m3rs_change_cursor;

CREATE OR REPLACE FUNCTION m3rs_append_change(
    change_kind text, change_execution text, change_round text, change_at timestamptz,
    change_state jsonb
) RETURNS void LANGUAGE sql AS $$
    INSERT INTO m3rs_changes (kind, execution_id, round_id, at, state_json)
    VALUES (change_kind, change_execution, change_round, change_at, change_state::text);
$$;

-- Numbers every committed unnumbered record; returns how many. Called by readers (and
-- retention) in a transaction of its own, which it makes durable whatever the session's
-- synchronous_commit says: a cursor a reader has seen must survive a server crash, or a
-- record could be numbered again below it.
CREATE FUNCTION m3rs_number_changes() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    numbered bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM m3rs_changes WHERE cursor IS NULL) THEN
        RETURN 0;
    END IF;
    -- Per schema, as in 0003. This statement's successors see every numbering committed
    -- before the lock was granted (READ COMMITTED: a snapshot per statement).
    PERFORM pg_advisory_xact_lock(hashtext('m3rs_changes'), hashtext(current_schema()));
    PERFORM set_config('synchronous_commit', 'on', true);
    UPDATE m3rs_changes AS c SET cursor = n.cursor
    FROM (
        SELECT u.appended,
               greatest(
                   coalesce((SELECT max(cursor) FROM m3rs_changes WHERE cursor IS NOT NULL), 0),
                   coalesce((SELECT pruned_through FROM m3rs_change_horizon WHERE id = 1), 0))
               + row_number() OVER (ORDER BY u.appended) AS cursor
        FROM m3rs_changes AS u WHERE u.cursor IS NULL
    ) AS n
    WHERE c.cursor IS NULL AND c.appended = n.appended;
    GET DIAGNOSTICS numbered = ROW_COUNT;
    RETURN numbered;
END
$$;

CREATE TRIGGER m3rs_changes_round_created
    AFTER INSERT ON m3rs_rounds
    FOR EACH ROW
    WHEN (NEW.status IN ('pending', 'response_validated', 'delivery_started', 'delivered',
                         'resolved', 'failed'))
    EXECUTE FUNCTION m3rs_round_changed();

CREATE TRIGGER m3rs_changes_round_status
    AFTER UPDATE ON m3rs_rounds
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('pending', 'response_validated', 'delivery_started', 'delivered',
                             'resolved', 'failed'))
    EXECUTE FUNCTION m3rs_round_changed();

CREATE TRIGGER m3rs_changes_execution_created
    AFTER INSERT ON m3rs_executions
    FOR EACH ROW EXECUTE FUNCTION m3rs_execution_changed();

CREATE TRIGGER m3rs_changes_execution_updated
    AFTER UPDATE ON m3rs_executions
    FOR EACH ROW
    WHEN (NEW.lifecycle IS DISTINCT FROM OLD.lifecycle
          OR NEW.lease_token IS DISTINCT FROM OLD.lease_token
          OR NEW.record_json IS DISTINCT FROM OLD.record_json)
    EXECUTE FUNCTION m3rs_execution_changed();
