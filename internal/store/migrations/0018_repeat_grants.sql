-- 0018_repeat_grants: repeat grants (issue 37, item 4). An approver who approves a call may
-- also approve the next `granted` calls of the same capability@version with the same canonical
-- argument digest, in the same conversation for the same principal, until expires_at, under the
-- capability revision (registry and policy) they approved under. Each later call passes stages
-- 1-3 again and takes one use (repeat_grant_uses, one row per confirmation: a call uses a
-- grant at most once). closed says why a grant stopped counting: exhausted, expired,
-- policy_changed ('' while it may still be used).
CREATE TABLE repeat_grants (
    id                TEXT        PRIMARY KEY,
    confirmation_id   TEXT        NOT NULL,
    conversation      TEXT        NOT NULL,
    principal         TEXT        NOT NULL,
    capability_id     TEXT        NOT NULL,
    version           INTEGER     NOT NULL,
    args_digest       TEXT        NOT NULL,
    registry_revision TEXT        NOT NULL,
    approver          TEXT        NOT NULL,
    granted           INTEGER     NOT NULL,
    remaining         INTEGER     NOT NULL,
    granted_at        {{time}} NOT NULL,
    expires_at        {{time}} NOT NULL,
    closed            TEXT        NOT NULL DEFAULT ''
) {{table}};
CREATE INDEX repeat_grants_scope_idx ON repeat_grants (conversation, principal, capability_id, version, args_digest);
CREATE TABLE repeat_grant_uses (
    confirmation_id TEXT        PRIMARY KEY,
    grant_id        TEXT        NOT NULL,
    remaining       INTEGER     NOT NULL,
    at              {{time}} NOT NULL
) {{table}};
