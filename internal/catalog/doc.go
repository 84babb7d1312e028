// Package catalog is catalog discovery for the model (issue 14; P072 "Local Capability
// Guidance" and "Local Contract Freeze"): the caller-scoped, bounded projection behind the two
// registered capabilities capability.catalog.list and capability.catalog.describe, their
// HMAC-authenticated cursors, the optional capability-guidance.v1 documents bound by digest to
// their exact contract, and the closed state machine of the turn's catalog controller.
//
// The catalog is a derived view of one registry snapshot, never a second registry, and never
// a permission: describing a capability grants nothing, and every call still goes through the
// executor's three gates (registered, admitted, policy). Visibility is decided before anything
// is read: an unknown, a hidden (reserved, past deadline, not dispatchable, out of the turn's
// scope) and a private (not model-visible) id share one not-found answer. Guidance is
// lower-trust documentation: absent or mismatched guidance is omitted, never reconstructed, and
// no URL in it is ever fetched. Every result is untrusted data in the executor's envelope.
package catalog
