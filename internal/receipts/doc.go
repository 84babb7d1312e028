// Package receipts is Airlock's verifiable log of authorizations and outcomes (issue 36): every
// audited call leaves two records, its authorization and its settlement, in an append-only log
// whose Merkle tree follows RFC 6962 (github.com/transparency-dev/merkle) and whose checkpoints
// are C2SP tlog-checkpoint signed notes (golang.org/x/mod/sumdb/note, Ed25519).
//
// The package is pure: it encodes records (Record, the leaf bytes), advances the tree by one
// leaf (Head.Append: the new compact range, root and inclusion proof), signs and opens
// checkpoints (Signer, OpenCheckpoint), reads and writes the JSON-lines export and verifies an
// export offline with nothing but the log's public keys (Verify). Where the log is kept (the
// store's receipts table: each audit row's draft written in the statement or transaction that
// writes the row, turned into records, placed in the tree and signed in batches by a
// sequencer) is internal/store's job.
//
// Every record carries its own receipt: the inclusion proof of its leaf in the tree that ends
// with it (size index+1) and, when the appending process holds the log key, the signed
// checkpoint of that tree. A verifier therefore names the record that was edited, removed,
// inserted or moved: each one is checked against a signature an attacker with write access to
// the database cannot make.
package receipts
