-- 0019_confirmation_presentation: what every approver surface shows of a confirmation and
-- could not read from the row before (issue 34, item 3). quorum is how many distinct approvals
-- the call needs, from the policy (JSON or Cedar) it was issued under (0 for rows issued
-- before: surfaces read 1); user_request is the turn's user message that asked, as stored in
-- the conversation's context when the confirmation was issued ('' when none was found).
ALTER TABLE confirmations ADD COLUMN quorum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE confirmations ADD COLUMN user_request TEXT NOT NULL DEFAULT '';
