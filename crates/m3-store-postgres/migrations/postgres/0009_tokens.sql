-- API tokens for m3 serve (m3_store::tokens): the secret's SHA-256 digest only, never the
-- secret; names (the principals answers are recorded as) and digests are unique.
CREATE TABLE m3rs_tokens (
    id           text PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    digest       text NOT NULL UNIQUE,
    record_json  text NOT NULL
);
