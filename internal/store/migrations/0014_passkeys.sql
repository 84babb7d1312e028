-- 0014_passkeys: approvers' WebAuthn passkeys (issue 21, item 3). A capability whose policy
-- says "approval/passkey" is decided only with an assertion by one of the deciding approver's
-- registered, not removed, passkeys over the decision's MAC. sign_count is the authenticator's
-- signature counter as last accepted (an assertion must raise it unless both are 0);
-- last_nonce the nonce of the decision that raised it, so a retry of that one presentation
-- is told apart from a replay. A removed passkey keeps its row (removed_at set): it never
-- decides again, and a re-registration of the same authenticator is refused.
-- {{bigint}} is a 64-bit integer (PostgreSQL BIGINT / SQLite INTEGER): a signature counter is a uint32.
CREATE TABLE passkeys (
    credential_id TEXT        NOT NULL PRIMARY KEY,
    approver      TEXT        NOT NULL,
    public_key    {{bytes}}   NOT NULL,
    sign_count    {{bigint}}     NOT NULL DEFAULT 0,
    aaguid        TEXT        NOT NULL DEFAULT '',
    name          TEXT        NOT NULL DEFAULT '',
    last_nonce    TEXT        NOT NULL DEFAULT '',
    created_at    {{time}} NOT NULL,
    last_used_at  {{time}},
    removed_at    {{time}}
) {{table}};
CREATE INDEX passkeys_approver_idx ON passkeys (approver);

-- Registration ceremonies in flight (the approver page's challenge between
-- navigator.credentials.create and its answer), kept in the store so any page instance behind
-- one address can finish what another began. One use each, 5 minutes at most.
CREATE TABLE passkey_challenges (
    id         TEXT        NOT NULL PRIMARY KEY,
    approver   TEXT        NOT NULL,
    session    {{json}}    NOT NULL,
    expires_at {{time}} NOT NULL
) {{table}};

-- Whether the confirmation's capability required a passkey when it was issued (its policy's
-- "approval/passkey"): the approver page then asks the approver's authenticator to sign the
-- decision. The worker judges by the policy it serves when the decision is presented.
ALTER TABLE confirmations ADD COLUMN passkey_required INTEGER NOT NULL DEFAULT 0;
