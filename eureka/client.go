package eureka

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"github.com/sirupsen/logrus"
)

// Options configure a Client.
type Options struct {
	// URLs of the Eureka servers, e.g. http://eureka:8761/eureka. Tried in
	// order; a URL that fails is skipped for the rest of that request.
	URLs []string
	// Username and Password enable HTTP basic auth when Username is set.
	Username string
	Password string
	// Timeout bounds each HTTP request to one server (default 5 s).
	Timeout time.Duration
	// TLSConfig for https URLs; nil means the system defaults.
	TLSConfig *tls.Config
	// Logger receives the layer's (and fargo's) log lines; nil means logrus'
	// standard logger.
	Logger logrus.FieldLogger
}

// Client talks to one Eureka cluster. It is safe for concurrent use.
type Client struct{}

// New validates opts and returns a Client. It never exits or panics on bad
// input; it returns an error wrapping ErrInvalid.
func New(opts Options) (*Client, error) { return nil, errors.New("TODO") }

// Register sends inst with a POST (always, even when the server already has
// the instance), so changed data and every metadata key reach the server.
func (c *Client) Register(ctx context.Context, inst Instance) error { return errors.New("TODO") }

// Heartbeat renews the lease of app/id. ErrNotFound means "register again".
func (c *Client) Heartbeat(ctx context.Context, app, id string) error { return errors.New("TODO") }

// Cancel removes app/id from the registry. ErrNotFound when unknown.
func (c *Client) Cancel(ctx context.Context, app, id string) error { return errors.New("TODO") }

// Instance reads one instance straight from the registry.
func (c *Client) Instance(ctx context.Context, app, id string) (Instance, error) {
	return Instance{}, errors.New("TODO")
}

// Instances lists the instances of app. An unknown app is an empty list,
// not an error.
func (c *Client) Instances(ctx context.Context, app string) ([]Instance, error) {
	return nil, errors.New("TODO")
}

// InstancesWithMetadata lists the instances of app whose metadata has every
// key of match with the same value.
func (c *Client) InstancesWithMetadata(ctx context.Context, app string, match map[string]string) ([]Instance, error) {
	return nil, errors.New("TODO")
}
