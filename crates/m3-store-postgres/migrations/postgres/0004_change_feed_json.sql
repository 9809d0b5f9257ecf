-- The feed's triggers read the stored record as `json` instead of `jsonb`: `json` only
-- validates the text and its operators scan it, while `jsonb` converts the whole record
-- (the round's requests and schemas) into a binary tree for the three fields the record
-- needs. The store benchmark measured the `jsonb` form (docs/performance.md).

CREATE OR REPLACE FUNCTION m3rs_round_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pending json := NEW.record_json::json -> 'pending';
    kind text := pending ->> 'operation_kind';
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
            'server', coalesce(pending ->> 'server', ''),
            'operation_kind', CASE WHEN kind IN ('tool', 'prompt', 'resource') THEN kind END,
            'operation_name', coalesce(pending ->> 'operation_name', ''),
            'failure_code', NEW.record_json::json ->> 'failure_code'));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION m3rs_execution_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    record json := NEW.record_json::json;
    cancelled_before boolean := TG_OP = 'UPDATE'
        AND OLD.record_json::json ->> 'cancel_requested_at' IS NOT NULL;
    state jsonb := jsonb_build_object('lifecycle', NEW.lifecycle,
                                      'outcome', record ->> 'outcome');
BEGIN
    IF record ->> 'cancel_requested_at' IS NOT NULL AND NOT cancelled_before THEN
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
