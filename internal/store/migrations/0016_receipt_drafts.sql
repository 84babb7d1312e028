-- 0016_receipt_drafts: what an audit row hands the receipts log (issue 36), written in the
-- statement or transaction that writes the row, so the log's part of the row's write is one
-- small insert and no read. The sequencer (store.SequenceReceipts) takes drafts in seq_id
-- order, builds each row's records (reading the call's confirmation, approvals and
-- requester, which a decision fixes), appends them to receipts with their indices, proofs and
-- checkpoints, and deletes the drafts, in one transaction under receipt_head's lock: a draft
-- becomes its records exactly once.
--   event_key  the audit row's key (or "proposal_decision/<id>"): one draft a row
--   draft      JSON: the row and the facts its writer knew, or records built already
CREATE TABLE receipt_drafts (
    seq_id    {{id}},
    event_key TEXT      NOT NULL UNIQUE,
    draft     {{bytes}} NOT NULL,
    at        {{time}}  NOT NULL
) {{table}};
