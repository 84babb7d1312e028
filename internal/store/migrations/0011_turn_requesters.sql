-- 0011_turn_requesters: the authenticated requester of each turn run (issue 21): the principal
-- its request was attested for and the client credential that attested it, recorded by the
-- turn's first inference round once the attestation verified. One attestation starts one
-- run chain (first_run_id: the run Temporal started, followed by its retries and resets), never
-- a second start of the workflow id.
CREATE TABLE turn_requesters (
    workflow_id  TEXT        NOT NULL,
    run_id       TEXT        NOT NULL,
    first_run_id TEXT        NOT NULL,
    principal    TEXT        NOT NULL,
    client       TEXT        NOT NULL,
    signature    TEXT        NOT NULL,
    at          {{time}} NOT NULL,
    PRIMARY KEY (workflow_id, run_id)
) {{table}};
CREATE INDEX turn_requesters_signature_idx ON turn_requesters (signature);

-- The approvals a confirmation gathered towards its capability's quorum (issue 21, item 2:
-- "approval/quorum" in the policy sidecar): one row per distinct approver, each an approval
-- judged like a single one (its own token generation, nonce and attestation).
CREATE TABLE confirmation_approvals (
    confirmation_id TEXT        NOT NULL,
    approver        TEXT        NOT NULL,
    generation      INTEGER     NOT NULL,
    nonce           TEXT        NOT NULL,
    at              {{time}} NOT NULL,
    PRIMARY KEY (confirmation_id, approver)
) {{table}};

-- The approver groups that may decide a confirmation (its capability's "approval/groups" when
-- it was issued), comma-joined between commas (",payments,ops,"); '' for every approver. The
-- approver page lists a signed-in approver only what their groups may decide.
ALTER TABLE confirmations ADD COLUMN approver_groups TEXT NOT NULL DEFAULT '';

-- How the approver who decided a confirmation proved it (issue 21, item 5): "CLI credential",
-- "password session on approver page web", with the quorum's other approvers; '' before.
ALTER TABLE confirmations ADD COLUMN approver_proof TEXT NOT NULL DEFAULT '';
