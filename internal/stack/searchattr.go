package stack

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// ErrSearchAttribute is returned (wrapped) when a requested search attribute has an unknown
// type, an invalid name, or already exists on the server with a different type.
var ErrSearchAttribute = errors.New("stack: search attribute")

// searchAttributeTypes maps the type names accepted in TemporalOptions.SearchAttributes (and
// by `temporal server start-dev --search-attribute`) to their indexed value types.
var searchAttributeTypes = map[string]enumspb.IndexedValueType{
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Int":         enumspb.INDEXED_VALUE_TYPE_INT,
	"Text":        enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Bool":        enumspb.INDEXED_VALUE_TYPE_BOOL,
	"Double":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Datetime":    enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

// searchAttr is one validated search attribute: its name, canonical type name and type.
type searchAttr struct {
	name, typeName string
	typ            enumspb.IndexedValueType
}

// parseSearchAttributes validates names and types (type names match case-insensitively) and
// returns the attributes sorted by name.
func parseSearchAttributes(m map[string]string) ([]searchAttr, error) {
	out := make([]searchAttr, 0, len(m))
	for name, typeName := range m {
		if !isIdentifier(name) {
			return nil, fmt.Errorf("%w: name %q is not an identifier", ErrSearchAttribute, name)
		}
		var sa *searchAttr
		for canon, typ := range searchAttributeTypes {
			if strings.EqualFold(canon, typeName) {
				sa = &searchAttr{name: name, typeName: canon, typ: typ}
				break
			}
		}
		if sa == nil {
			return nil, fmt.Errorf("%w: %s: unknown type %q (want Keyword, Int, Text, Bool, Double, Datetime or KeywordList)",
				ErrSearchAttribute, name, typeName)
		}
		out = append(out, *sa)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// ensureSearchAttributes adds the attributes missing from namespace and fails with
// ErrSearchAttribute if one exists with another type. It is idempotent and tolerates a
// concurrent add of the same attribute.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string, attrs []searchAttr) error {
	if len(attrs) == 0 {
		return nil
	}
	missing, err := missingSearchAttributes(ctx, c, namespace, attrs)
	if err != nil || len(missing) == 0 {
		return err
	}
	req := &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: make(map[string]enumspb.IndexedValueType, len(missing)),
	}
	for _, sa := range missing {
		req.SearchAttributes[sa.name] = sa.typ
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, req)
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("stack: add search attributes to namespace %s: %w", namespace, err)
	}
	// Verify: a concurrent add may have used another type.
	missing, err = missingSearchAttributes(ctx, c, namespace, attrs)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("stack: search attribute %s still missing from namespace %s after add", missing[0].name, namespace)
	}
	return awaitSearchAttributes(ctx, c, namespace, attrs)
}

// awaitAttributesLimit bounds awaitSearchAttributes: the server's search-attribute cache
// refreshes within a minute (its namespace registry within seconds).
const awaitAttributesLimit = 90 * time.Second

// awaitSearchAttributes waits until a visibility query on every attribute of attrs is
// accepted: a server with its search-attribute cache on (ServerSettings; every production
// server) refuses an attribute added at run time until its caches refresh (up to a minute), and
// a turn started meanwhile would be refused for it. It returns at once on a server that
// already knows them, and the last refusal when ctx ends first or after awaitAttributesLimit
// (a server that never accepts the query must not hang a caller without a deadline).
func awaitSearchAttributes(ctx context.Context, c client.Client, namespace string, attrs []searchAttr) error {
	ctx, cancel := context.WithTimeout(ctx, awaitAttributesLimit)
	defer cancel()
	names := make([]string, len(attrs))
	for i, sa := range attrs {
		names[i] = sa.name + " IS NOT NULL"
	}
	query := strings.Join(names, " AND ")
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stack: search attributes of namespace %s not usable yet (the server's cache refreshes within a minute): %w", namespace, err)
		case <-tick.C:
		}
	}
}

// missingSearchAttributes lists the namespace's attributes and returns those of attrs that are
// absent; an attribute present with a different type is an ErrSearchAttribute error.
func missingSearchAttributes(ctx context.Context, c client.Client, namespace string, attrs []searchAttr) ([]searchAttr, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("stack: list search attributes of namespace %s: %w", namespace, err)
	}
	var missing []searchAttr
	for _, sa := range attrs {
		have, ok := resp.GetCustomAttributes()[sa.name]
		if !ok {
			have, ok = resp.GetSystemAttributes()[sa.name]
		}
		switch {
		case !ok:
			missing = append(missing, sa)
		case have != sa.typ:
			return nil, fmt.Errorf("%w: %s exists in namespace %s as %s, want %s",
				ErrSearchAttribute, sa.name, namespace, have, sa.typ)
		}
	}
	return missing, nil
}
