-- 0004_decision_mac: decisions carry a MAC instead of the token (DESIGN "Tokens").
-- generation counts the tokens a confirmation was issued: a presentation that consumed the
-- token without a valid decision gets the proposal a fresh one (generation + 1), so it stays
-- decidable instead of waiting out its expiry.
ALTER TABLE confirmations ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

-- Every decision nonce a consumer has seen, with its verdict: a MAC copied out of history is
-- refused as a replay, and an approver surface learns what became of its own decision.
CREATE TABLE decision_nonces (
    nonce           TEXT        PRIMARY KEY,
    confirmation_id TEXT        NOT NULL,
    presentation    TEXT        NOT NULL,
    approver        TEXT        NOT NULL DEFAULT '',
    decision        TEXT        NOT NULL DEFAULT '',
    verdict         TEXT        NOT NULL,
    detail          TEXT        NOT NULL DEFAULT '',
    at              {{time}} NOT NULL
) {{table}};
CREATE INDEX decision_nonces_confirmation_idx ON decision_nonces (confirmation_id);

-- How many times an idempotent capability's execution was started for one proposal.
ALTER TABLE executions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
