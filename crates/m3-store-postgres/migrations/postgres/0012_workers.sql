-- The worker registry (m3_store::workers): one row per running worker, written by that
-- worker (announce, heartbeat, retire) or removed by a prune; `seq` keeps announce order.
CREATE TABLE m3rs_workers (
    seq          bigserial,
    worker_id    text PRIMARY KEY,
    record_json  text NOT NULL
);
