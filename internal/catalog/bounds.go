package catalog

import "time"

// Capability ids of the two catalog operations: the controller's allowlist is exactly these.
const (
	ListID     = "capability.catalog.list"
	DescribeID = "capability.catalog.describe"
)

// IsCatalog reports whether id is one of the two catalog operations (the controller's
// allowlist; a capability named by a result is never added to it).
func IsCatalog(id string) bool { return id == ListID || id == DescribeID }

// Contract names (schema/v discriminators).
const (
	ResultSchema   = "capability-catalog-result.v1"
	GuidanceSchema = "capability-guidance.v1"
)

// First-slice bounds (P072 "Local Contract Freeze"), frozen before coding.
const (
	// DefaultLimit and MaxLimit are the list page sizes (entries).
	DefaultLimit = 8
	MaxLimit     = 16
	// MaxListBytes and MaxDescribeBytes bound one result's canonical JSON.
	MaxListBytes     = 16 << 10
	MaxDescribeBytes = 32 << 10
	// MaxSummaryProperties is how many top-level argument properties the default schema
	// summary lists; more are signalled with "truncated": true.
	MaxSummaryProperties = 32
	// MaxSummaryDescription bounds a list entry's description (bytes, cut on a rune boundary).
	MaxSummaryDescription = 512
	// MaxGuidanceText bounds guidance description and usage text combined (UTF-8 bytes).
	MaxGuidanceText = 2 << 10
	// MaxExamples and MaxExampleBytes bound guidance request examples (canonical JSON each).
	MaxExamples     = 2
	MaxExampleBytes = 4 << 10
	// CursorTTL is a cursor's lifetime; a cursor never outlives 5 minutes.
	CursorTTL = 5 * time.Minute
	// MaxCursorBytes bounds the cursor argument.
	MaxCursorBytes = 1024
)

// Per-turn controller bounds: catalog reads, inference rounds while the controller runs, list
// pages, and catalog bytes entering model context.
const (
	MaxReads        = 3
	MaxRounds       = 4
	MaxPages        = 2
	MaxContextBytes = 64 << 10
)
