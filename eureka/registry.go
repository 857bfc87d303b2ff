package eureka

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Registry is one read of a server's whole registry, indexed by app. It is
// immutable: every method returns copies, so one Registry can serve many
// readers at once.
type Registry struct {
	apps map[string][]Instance // by upper-cased app name
	// hashcode is the server's apps__hashcode of this state (instance
	// counts per status, such as "UP_20000_"), the check Eureka's own
	// client makes after applying a delta.
	hashcode string
	size     int
}

// Applications reads the whole registry (GET /apps): one request however
// many apps there are, where Instances costs one per app.
func (c *Client) Applications(ctx context.Context) (*Registry, error) {
	body, err := c.do(ctx, "applications", http.MethodGet, "/apps", nil)
	if err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	reg, err := decodeRegistry(body)
	if err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	return reg, nil
}

// Len is how many instances the registry holds.
func (r *Registry) Len() int { return r.size }

// Instances lists the instances of app (case-insensitive); an unknown app
// is an empty list, as with Client.Instances.
func (r *Registry) Instances(app string) []Instance {
	return append([]Instance(nil), r.apps[strings.ToUpper(app)]...)
}

// InstancesWithMetadata lists the instances of app whose metadata has every
// key of match with the same value, as Client.InstancesWithMetadata does.
func (r *Registry) InstancesWithMetadata(app string, match map[string]string) []Instance {
	var out []Instance
	for _, inst := range r.apps[strings.ToUpper(app)] {
		if hasMetadata(inst, match) {
			out = append(out, inst)
		}
	}
	return out
}

// newRegistry indexes insts by app.
func newRegistry(insts []Instance, hashcode string) *Registry {
	r := &Registry{apps: map[string][]Instance{}, hashcode: hashcode, size: len(insts)}
	for _, inst := range insts {
		app := strings.ToUpper(inst.App)
		r.apps[app] = append(r.apps[app], inst)
	}
	return r
}
