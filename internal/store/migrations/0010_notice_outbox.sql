-- 0010_notice_outbox: the notices Airlock owes approvers (issue 23): one row per delivery of
-- one notice (a new pending confirmation, a reminder, an escalation) to one channel. id is the
-- delivery id, derived from the confirmation id, the kind and the channel, so the activity that
-- issues the confirmation can write its rows again on a retry and converge on one row each;
-- channels receive it as their idempotency key. The worker's dispatcher claims due rows with a
-- lease (lease_until), so a worker killed mid-send leaves the row to be sent again, under the
-- same delivery id, once the lease runs out. state: queued, sent, skipped (the confirmation was
-- decided first), failed (gave up after its last attempt).
CREATE TABLE notice_outbox (
    id              TEXT     NOT NULL PRIMARY KEY,
    confirmation_id TEXT     NOT NULL,
    channel         TEXT     NOT NULL,
    kind            TEXT     NOT NULL,
    payload         {{json}} NOT NULL,
    due_at          {{time}} NOT NULL,
    attempts        INTEGER  NOT NULL DEFAULT 0,
    lease_until     {{time}},
    state           TEXT     NOT NULL DEFAULT 'queued',
    last_error      TEXT     NOT NULL DEFAULT '',
    created_at      {{time}} NOT NULL,
    done_at         {{time}}
) {{table}};
CREATE INDEX notice_outbox_due ON notice_outbox (state, due_at);
CREATE INDEX notice_outbox_confirmation ON notice_outbox (confirmation_id);
