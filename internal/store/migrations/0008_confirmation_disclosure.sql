-- 0008_confirmation_disclosure: what the approver surfaces show about where a call sends what
-- (issue 19, item 4): the registry.Disclosure the worker computed when it issued the
-- confirmation (description, side effect, declared destination, hosts as contacted, the
-- declared fields' values), as JSON; '' for rows issued before it was kept.
ALTER TABLE confirmations ADD COLUMN disclosure TEXT NOT NULL DEFAULT '';
