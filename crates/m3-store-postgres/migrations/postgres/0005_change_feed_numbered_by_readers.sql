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

-- What the triggers need, in columns the writers fill, so that a change does not parse the
-- stored record (parsing it cost a third of the round writes' throughput). A row written
-- without them (by another program) is still read from its record.
ALTER TABLE m3rs_rounds ADD COLUMN server text, ADD COLUMN operation_kind text,
                        ADD COLUMN operation_name text;
UPDATE m3rs_rounds SET server = record_json::json #>> '{pending,server}',
                       operation_kind = record_json::json #>> '{pending,operation_kind}',
                       operation_name = record_json::json #>> '{pending,operation_name}';
ALTER TABLE m3rs_executions ADD COLUMN cancel_requested_at timestamptz;
UPDATE m3rs_executions
SET cancel_requested_at = (record_json::json ->> 'cancel_requested_at')::timestamptz;

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

-- A new round, or a round whose status changed: its identity from the row's columns, its
-- failure code from the record (only for a failure).
CREATE OR REPLACE FUNCTION m3rs_round_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pending json;
    round_server text := NEW.server;
    round_kind text := NEW.operation_kind;
    round_operation text := NEW.operation_name;
BEGIN
    IF round_server IS NULL THEN
        pending := NEW.record_json::json -> 'pending';
        round_server := pending ->> 'server';
        round_kind := pending ->> 'operation_kind';
        round_operation := pending ->> 'operation_name';
    END IF;
    INSERT INTO m3rs_changes (kind, execution_id, round_id, at, state_json)
    VALUES (
        CASE NEW.status
            WHEN 'pending' THEN 'round.pending'
            WHEN 'response_validated' THEN 'round.answered'
            WHEN 'delivery_started' THEN 'round.delivery_started'
            WHEN 'delivered' THEN 'round.delivered'
            WHEN 'resolved' THEN 'round.resolved'
            ELSE 'round.failed'
        END,
        NEW.execution_id, NEW.round_id, NEW.updated_at,
        json_build_object(
            'round_index', NEW.round_index,
            'status', NEW.status,
            'server', coalesce(round_server, ''),
            'operation_kind',
                CASE WHEN round_kind IN ('tool', 'prompt', 'resource') THEN round_kind END,
            'operation_name', coalesce(round_operation, ''),
            'failure_code', CASE WHEN NEW.status = 'failed'
                THEN NEW.record_json::json ->> 'failure_code' END)::text);
    RETURN NULL;
END
$$;

-- A new execution, or one whose lifecycle, lease token or cancel time changed; the records
-- in the order of m3_store::changes::rules::execution_changes. The record is parsed only
-- for a change that appends one (its outcome).
CREATE OR REPLACE FUNCTION m3rs_execution_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    state jsonb := jsonb_build_object('lifecycle', NEW.lifecycle,
                                      'outcome', NEW.record_json::json ->> 'outcome');
BEGIN
    IF NEW.cancel_requested_at IS NOT NULL
       AND (TG_OP = 'INSERT' OR OLD.cancel_requested_at IS NULL) THEN
        PERFORM m3rs_append_change('execution.cancel_requested', NEW.execution_id, NULL,
                                   NEW.updated_at, state);
    END IF;
    IF NEW.lease_token IS NOT NULL
       AND (TG_OP = 'INSERT' OR NEW.lease_token IS DISTINCT FROM OLD.lease_token) THEN
        PERFORM m3rs_append_change('execution.claimed', NEW.execution_id, NULL,
                                   NEW.updated_at, state);
    END IF;
    IF (TG_OP = 'INSERT' OR NEW.lifecycle IS DISTINCT FROM OLD.lifecycle)
       AND NEW.lifecycle IN ('queued', 'waiting_for_input', 'finished') THEN
        PERFORM m3rs_append_change(
            CASE NEW.lifecycle
                WHEN 'queued' THEN 'execution.queued'
                WHEN 'waiting_for_input' THEN 'execution.waiting_for_input'
                ELSE 'execution.finished'
            END,
            NEW.execution_id, NULL, NEW.updated_at, state);
    END IF;
    RETURN NULL;
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
          OR NEW.cancel_requested_at IS DISTINCT FROM OLD.cancel_requested_at)
    EXECUTE FUNCTION m3rs_execution_changed();
