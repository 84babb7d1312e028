-- 0015_api_turns: the turns started through the application API (issue 32), one per caller
-- and idempotency key: the same request sent twice starts one turn; the same key with another
-- body is refused. body_sha256 is the SHA-256 of the request as the API canonicalized it.
CREATE TABLE api_turns (
    caller       TEXT        NOT NULL,
    idem_key     TEXT        NOT NULL,
    body_sha256  TEXT        NOT NULL,
    workflow_id  TEXT        NOT NULL,
    conversation TEXT        NOT NULL,
    principal    TEXT        NOT NULL,
    at          {{time}} NOT NULL,
    PRIMARY KEY (caller, idem_key)
) {{table}};
CREATE INDEX api_turns_workflow_idx ON api_turns (workflow_id);
