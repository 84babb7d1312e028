package capabilities

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/airlock-dev/airlock/internal/catalog"
	"github.com/airlock-dev/airlock/registry"
)

// errNoSnapshot is returned when a catalog read runs without the registry snapshot of its
// execution (a caller outside the executor).
var errNoSnapshot = errors.New("capabilities: catalog read without a registry snapshot")

// CatalogList is capability.catalog.list@1: one page of the caller's visible catalog, projected
// from the registry snapshot stage 5 resolved the call in, for the turn's principal and scope
// (never the model's). A refusal (stale_cursor, result_too_large) is returned as data and
// error: the executor records it as a failed, non-retried read.
func CatalogList(cat *catalog.Catalog) registry.Implementation {
	return registry.Typed(catalog.ListID, 1, func(_ context.Context, args *catalog.ListArgs, inv registry.Invocation) (registry.Output, error) {
		if inv.Registry == nil {
			return registry.Output{}, errNoSnapshot
		}
		data, ref := cat.List(inv.Registry, catalog.Caller{Principal: inv.Principal, Scope: inv.Scope}, *args, inv.Now)
		return catalogOutput(data, ref)
	})
}

// CatalogDescribe is capability.catalog.describe@1: one visible capability's contract,
// classification, availability, authorization requirements and bound guidance. An unknown,
// hidden or private id gets the one not_found refusal.
func CatalogDescribe(cat *catalog.Catalog) registry.Implementation {
	return registry.Typed(catalog.DescribeID, 1, func(ctx context.Context, args *catalog.DescribeArgs, inv registry.Invocation) (registry.Output, error) {
		if inv.Registry == nil {
			return registry.Output{}, errNoSnapshot
		}
		data, ref := cat.Describe(ctx, inv.Registry, catalog.Caller{Principal: inv.Principal, Scope: inv.Scope}, *args, inv.Now)
		return catalogOutput(data, ref)
	})
}

func catalogOutput(data json.RawMessage, ref *catalog.Refusal) (registry.Output, error) {
	if ref != nil {
		b, err := json.Marshal(ref)
		if err != nil {
			return registry.Output{}, err
		}
		return registry.Output{Data: b, Error: ref.Error()}, nil
	}
	return registry.Output{Data: data}, nil
}
