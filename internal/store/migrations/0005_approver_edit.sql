-- 0005_approver_edit: an approver's edit denies the original proposal (reason
-- edited_by_approver) and lets the turn run the approver's own arguments as a new proposal.
-- edited_digest is the canonical digest of the arguments the edit's MAC authorized ('' for
-- every other decision): the new proposal's confirmation is recorded only for those.
ALTER TABLE confirmations ADD COLUMN edited_digest TEXT NOT NULL DEFAULT '';

-- original_digest is, on a proposal_edited row, the digest of the model's arguments the edit
-- replaced (args_digest holds the edited one): one row carries both.
ALTER TABLE audit_events ADD COLUMN original_digest TEXT NOT NULL DEFAULT '';
