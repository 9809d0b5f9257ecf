-- The change feed: one record per state change of a round or an execution, appended by the
-- database in the transaction of the change, numbered in commit order.
--
-- A sequence value taken during a transaction is not commit-ordered (a transaction that
-- took 5 can commit after one that took 6, and a reader of `cursor > 4` that saw 6 would
-- skip 5 for ever). So the row triggers below are deferred constraint triggers: they run
-- at COMMIT, after every other statement of the transaction, and each takes the feed's
-- transaction-level advisory lock before it takes the next cursor. The lock is held until
-- the commit is complete (and visible), so the next committer's cursors are larger than
-- every visible one: cursors are in commit order and `cursor > last` resumes exactly. It is
-- the last lock a transaction takes, so it cannot deadlock; it serializes only the commits
-- of transactions that change state (docs/changes.md measures the cost).

CREATE TABLE m3rs_changes (
    cursor        bigint PRIMARY KEY,
    kind          text NOT NULL,
    execution_id  text NOT NULL,
    round_id      text,
    at            timestamptz NOT NULL,
    actor         text,
    state_json    text NOT NULL
);

CREATE SEQUENCE m3rs_change_cursor AS bigint MINVALUE 1;

-- The newest cursor retention removed (no row: none).
CREATE TABLE m3rs_change_horizon (
    id              integer PRIMARY KEY CHECK (id = 1),
    pruned_through  bigint NOT NULL CHECK (pruned_through >= 0)
);

CREATE FUNCTION m3rs_append_change(
    change_kind text, change_execution text, change_round text, change_at timestamptz,
    change_state jsonb
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- Per schema: stores in other schemas of one database do not wait for each other.
    PERFORM pg_advisory_xact_lock(hashtext('m3rs_changes'), hashtext(current_schema()));
    INSERT INTO m3rs_changes (cursor, kind, execution_id, round_id, at, state_json)
    VALUES (nextval('m3rs_change_cursor'), change_kind, change_execution, change_round,
            change_at, change_state::text);
END
$$;

-- A new round, or a round whose status changed. The state comes from the stored record's
-- identity and status fields, never from its responses.
CREATE FUNCTION m3rs_round_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    record jsonb := NEW.record_json::jsonb;
BEGIN
    PERFORM m3rs_append_change(
        CASE NEW.status
            WHEN 'pending' THEN 'round.pending'
            WHEN 'response_validated' THEN 'round.answered'
            WHEN 'delivery_started' THEN 'round.delivery_started'
            WHEN 'delivered' THEN 'round.delivered'
            WHEN 'resolved' THEN 'round.resolved'
            ELSE 'round.failed'
        END,
        NEW.execution_id, NEW.round_id, NEW.updated_at,
        jsonb_build_object(
            'round_index', NEW.round_index,
            'status', NEW.status,
            'server', coalesce(record #>> '{pending,server}', ''),
            'operation_kind', CASE WHEN record #>> '{pending,operation_kind}'
                    IN ('tool', 'prompt', 'resource')
                THEN record #>> '{pending,operation_kind}' END,
            'operation_name', coalesce(record #>> '{pending,operation_name}', ''),
            'failure_code', record ->> 'failure_code'));
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER m3rs_changes_round_created
    AFTER INSERT ON m3rs_rounds DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.status IN ('pending', 'response_validated', 'delivery_started', 'delivered',
                         'resolved', 'failed'))
    EXECUTE FUNCTION m3rs_round_changed();

CREATE CONSTRAINT TRIGGER m3rs_changes_round_status
    AFTER UPDATE ON m3rs_rounds DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('pending', 'response_validated', 'delivery_started', 'delivered',
                             'resolved', 'failed'))
    EXECUTE FUNCTION m3rs_round_changed();

-- A new execution, or one whose lifecycle, lease token or cancel time changed; the records
-- in the order of m3_store::changes::rules::execution_changes.
CREATE FUNCTION m3rs_execution_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    record jsonb := NEW.record_json::jsonb;
    old_record jsonb := CASE WHEN TG_OP = 'UPDATE' THEN OLD.record_json::jsonb END;
    state jsonb := jsonb_build_object('lifecycle', NEW.lifecycle,
                                      'outcome', record ->> 'outcome');
BEGIN
    IF record ->> 'cancel_requested_at' IS NOT NULL
       AND (old_record IS NULL OR old_record ->> 'cancel_requested_at' IS NULL) THEN
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

CREATE CONSTRAINT TRIGGER m3rs_changes_execution_created
    AFTER INSERT ON m3rs_executions DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION m3rs_execution_changed();

CREATE CONSTRAINT TRIGGER m3rs_changes_execution_updated
    AFTER UPDATE ON m3rs_executions DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.lifecycle IS DISTINCT FROM OLD.lifecycle
          OR NEW.lease_token IS DISTINCT FROM OLD.lease_token
          OR NEW.record_json IS DISTINCT FROM OLD.record_json)
    EXECUTE FUNCTION m3rs_execution_changed();
