-- 0020_confirmation_distinct: whether the confirmation's capability required a distinct
-- approver when it was issued (its policy's "approval/distinct-approver", JSON or Cedar: four
-- eyes), so that every approver surface says "other than the requester" from one stored fact
-- (0 for rows issued before it was kept). The worker judges by the policy it serves when the
-- decision is presented.
ALTER TABLE confirmations ADD COLUMN distinct_approver INTEGER NOT NULL DEFAULT 0;
