-- Policies for unattended rounds (m3_store::policies): one row per policy, names unique,
-- `seq` keeps the order they were added. And the deadline reminders appended: one row per
-- (round, fraction), inserted by the statement that appends the reminder's change record,
-- so a retried or concurrent reminder appends once.
CREATE TABLE m3rs_policies (
    seq          bigserial PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    record_json  text NOT NULL
);

CREATE TABLE m3rs_round_reminders (
    execution_id  text NOT NULL,
    round_id      text NOT NULL,
    fraction      text NOT NULL,
    PRIMARY KEY (execution_id, round_id, fraction)
);
