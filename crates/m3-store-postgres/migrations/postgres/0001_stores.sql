-- Both m3-rs stores on PostgreSQL. Canonical payloads stay `text` (never `jsonb`:
-- it reorders keys and reformats numbers, and idempotent replays compare bytes).
-- Every timestamp is `timestamptz` (microseconds). The tables live in the store's
-- schema (the connection's search_path).

CREATE TABLE m3rs_executions (
    execution_id      text PRIMARY KEY,
    lifecycle         text NOT NULL,
    human_input       text NOT NULL,
    finished          boolean NOT NULL,
    spec_json         text NOT NULL,
    record_json       text NOT NULL,
    lease_token       text UNIQUE,
    lease_expires_at  timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE INDEX m3rs_executions_listing ON m3rs_executions (created_at, execution_id);
CREATE INDEX m3rs_executions_leases ON m3rs_executions (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL AND NOT finished;

CREATE TABLE m3rs_execution_events (
    execution_id  text NOT NULL,
    sequence      bigint NOT NULL,
    kind          text NOT NULL,
    payload_json  text NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (execution_id, sequence)
);

CREATE TABLE m3rs_rounds (
    execution_id             text NOT NULL,
    round_id                 text NOT NULL,
    round_index              bigint NOT NULL,
    status                   text NOT NULL,
    record_json              text NOT NULL,
    redacted_responses_json  text,
    lease_expires_at         timestamptz,
    created_at               timestamptz NOT NULL,
    updated_at               timestamptz NOT NULL,
    PRIMARY KEY (execution_id, round_id)
);
CREATE INDEX m3rs_rounds_by_index ON m3rs_rounds (execution_id, round_index);
