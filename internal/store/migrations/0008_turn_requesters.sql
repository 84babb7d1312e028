-- 0008_turn_requesters: the authenticated requester of each turn run (issue 21): the principal
-- its request was attested for and the client credential that attested it, recorded by the
-- turn's first inference round once the attestation verified. The signature is unique: one
-- attestation starts one run.
CREATE TABLE turn_requesters (
    workflow_id TEXT        NOT NULL,
    run_id      TEXT        NOT NULL,
    principal   TEXT        NOT NULL,
    client      TEXT        NOT NULL,
    signature   TEXT        NOT NULL UNIQUE,
    at          {{time}} NOT NULL,
    PRIMARY KEY (workflow_id, run_id)
) {{table}};
