package registry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

type fetchArgs struct {
	URL string `json:"url" validate:"required,url"`
}

type noArgs struct{}

type listArgs struct {
	Prefix string `json:"prefix,omitempty"`
}

type describeArgs struct {
	ID string `json:"capability_id" validate:"required"`
}

// Load binds Go implementations to the embedded registry; the catalog is generated from it,
// argument schemas included.
func ExampleLoad() {
	reg, err := registry.Load([]registry.Source{registry.Base(), registry.BasePolicy()}, []registry.Implementation{
		registry.Typed("system.health", 1, func(context.Context, *noArgs, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
		registry.Typed("web.fetch", 1, func(context.Context, *fetchArgs, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
		registry.Typed("capability.catalog.list", 1, func(context.Context, *listArgs, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
		registry.Typed("capability.catalog.describe", 1, func(context.Context, *describeArgs, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range reg.Catalog(nil, time.Now()) {
		e, _ := reg.ByToolName(c.Name)
		fmt.Printf("%s -> %s@%d automatic=%v\n", c.Name, c.CapabilityID, c.Version, e.Automatic())
	}
	// Output:
	// capability_catalog_describe -> capability.catalog.describe@1 automatic=true
	// capability_catalog_list -> capability.catalog.list@1 automatic=true
	// system_health -> system.health@1 automatic=true
	// web_fetch -> web.fetch@1 automatic=false
}
