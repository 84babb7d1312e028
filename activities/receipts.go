package activities

import (
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// receiptFacts is what stage 6 knows of a call beyond its audit row, for the row's receipts
// records (issue 36): the registry it was judged under (revision, the capability's
// fingerprint, its MCP pin), the quorum its policy asks for, the rule that let an automatic
// call run, and the digest of the result as the model was given it. It reads the registry
// the worker serves; nothing here changes what the turn does.
func (a *Activities) receiptFacts(r *AuditRecord, msgs []inference.Message) *store.ReceiptFacts {
	reg := a.reg()
	if reg == nil {
		return nil
	}
	f := &store.ReceiptFacts{RegistryRevision: reg.Revision()}
	key := keyOf(r.CapabilityID, r.Version)
	if c, ok := reg.ByKey(key); ok {
		f.Fingerprint = c.Fingerprint()
		if c.Airlock.MCP != nil {
			f.MCPPin = c.Airlock.MCP.Digest
		}
		// A call that ran without a confirmation ran by a structural rule (local and
		// read-only, or a GET of a named internal service) or, otherwise, by the
		// automatic-when-user-provided policy.
		switch {
		case c.Automatic() && c.Airlock.Network != registry.NetworkLocal && c.InternalRead():
			f.Rule = "internal_read"
		case c.Automatic():
			f.Rule = "local_read_only"
		default:
			f.Rule = "user_provided"
		}
		if pe, ok := reg.Policy().Entry(key); ok {
			f.Quorum = pe.Approvals()
		}
	}
	switch Outcome(r.Kind) {
	case OutcomeExecuted, OutcomeFailed, OutcomeUnknown:
		if len(msgs) > 0 {
			f.ResultDigest = receipts.Digest([]byte(msgs[len(msgs)-1].Content))
		}
	}
	return f
}
