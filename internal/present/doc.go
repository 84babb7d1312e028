// Package present builds the one presentation of a stored confirmation (package
// presentation) for every surface that reads the store (the approver page, the CLI, the
// application API, the client package, the notices): the row's own facts (Input), and what the
// store knows around it (Gather: the attested requester, the approvals counted so far, the
// audited outcome of a decided call).
package present
