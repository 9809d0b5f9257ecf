-- Who answered a round: the actor of the accepted submission, stored with its redacted
-- projection by the same guarded UPDATE (NULL before an answer, or for an answer that
-- named nobody). Not a secret: every read surface shows it.
ALTER TABLE m3rs_rounds ADD COLUMN answered_by_json text;
