// Package registry loads the checked-in capability registry (capability-registry.v1, seed P072)
// and binds Go implementations to its entries. The registry is the runtime allow-set: loading
// fails closed with an operator diagnostic on a missing, malformed or inconsistent file, on an
// entry without an implementation and on an implementation without an entry. The catalog the
// model sees is generated from the loaded registry on every request; argument JSON Schemas are
// generated from the Go argument types (invopop/jsonschema), never written by hand.
package registry
