-- 0007_confirmation_provenance: where each argument value of a confirmation's proposal came
-- from (internal/provenance, issue 24), computed in trusted code when the confirmation is
-- issued; a JSON provenance.Report, '' for confirmations issued before it existed. The audit
-- row of the confirmation request carries the same report.
ALTER TABLE confirmations ADD COLUMN provenance TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN provenance TEXT NOT NULL DEFAULT '';
