-- Webhook subscriptions and the answer-link key (m3_store::subscriptions). One text row per
-- subscription, written by compare-and-set on the whole text; the shared rules decide.

CREATE TABLE m3rs_subscriptions (
    id           text PRIMARY KEY,
    record_json  text NOT NULL
);

CREATE TABLE m3rs_link_key (
    id          integer PRIMARY KEY CHECK (id = 1),
    key         text NOT NULL,
    created_at  timestamptz NOT NULL
);
