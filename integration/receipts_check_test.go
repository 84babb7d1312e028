package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
)

// receiptCheck is what the receipts log of a store says about its audit rows (issue 36): each
// row's records present once, indices dense, and the export verifying with the log's public
// keys.
type receiptCheck struct {
	Records int `json:"records"`
	// Gaps counts missing records: an index skipped, or an audit row without a record it
	// should have left.
	Gaps int `json:"gaps"`
	// Duplicates counts records of one (event, type) beyond the first, and records of no
	// audit row.
	Duplicates int      `json:"duplicates"`
	Details    []string `json:"details,omitempty"`
	// Verify is the offline verification's error ("" when it verified).
	Verify string `json:"verify,omitempty"`
}

// checkReceipts compares the log with rows, every audit row of the store, and verifies an
// export of it with the public keys in home.
func checkReceipts(ctx context.Context, st *store.Store, home string, rows []store.AuditEvent) receiptCheck {
	var rc receiptCheck
	// The worker sequences in the background; whatever it has not placed yet is placed here,
	// signed with the worker's key, as an export would.
	key, err := receipts.LoadKey(home)
	if err != nil {
		rc.Verify = err.Error()
		return rc
	}
	st.UseReceiptKey(key)
	if _, err := st.SequenceReceipts(ctx); err != nil {
		rc.Verify = err.Error()
		return rc
	}
	seen := map[string]int{}
	next := uint64(0)
	err = st.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
		rc.Records++
		if r.Index != next {
			rc.Gaps++
			rc.Details = append(rc.Details, fmt.Sprintf("index %d follows %d", r.Index, int64(next)-1))
		}
		next = r.Index + 1
		rec, err := receipts.ParseRecord(r.Leaf)
		if err != nil {
			return err
		}
		seen[rec.Event+" "+rec.Type]++
		return nil
	})
	if err != nil {
		rc.Details = append(rc.Details, err.Error())
		rc.Gaps++
		return rc
	}
	want := map[string]bool{}
	for _, r := range rows {
		for _, typ := range store.ReceiptTypes(r.Outcome) {
			k := r.Key + " " + typ
			want[k] = true
			if seen[k] == 0 {
				rc.Gaps++
				rc.Details = append(rc.Details, "no "+typ+" record of audit row "+r.Key)
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n := seen[k]; n > 1 {
			rc.Duplicates += n - 1
			rc.Details = append(rc.Details, fmt.Sprintf("%d records of %s", n, k))
		} else if !want[k] {
			rc.Duplicates++
			rc.Details = append(rc.Details, "a record of no audit row: "+k)
		}
	}
	var buf bytes.Buffer
	if err := st.ExportReceipts(ctx, receipts.NewWriter(&buf)); err != nil {
		rc.Verify = err.Error()
		return rc
	}
	keyring, err := receipts.LoadKeyring(filepath.Join(home, receipts.PublicFile))
	if err != nil {
		rc.Verify = err.Error()
		return rc
	}
	if _, err := receipts.Verify(&buf, keyring, receipts.VerifyOptions{}); err != nil {
		rc.Verify = err.Error()
	}
	return rc
}
