// Package cedarpolicy is Airlock's Cedar policy engine (issue 37) on the official
// github.com/cedar-policy/cedar-go: a policy set is compiled against a schema generated from
// the registry (Schema: one action per capability, principal User in Group, resource
// Destination, context with typed arguments, each argument field's provenance, the leaving
// values' hosts and domains, and the turn's facts) and decides each call with three outcomes.
// A permit runs the call without a human; a forbid refuses it at stage 3 with the policy's
// @reason; no decision asks: Airlock's argument-bound confirmation, decided by the groups and
// quorum the matching @ask rules name. A policy naming an unknown capability, argument or
// attribute is refused at Compile (strict validation); the loader checks Groups against the
// approvers file.
package cedarpolicy
