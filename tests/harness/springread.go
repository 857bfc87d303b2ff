package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// SpringInstance is the part of GET /eureka/apps/{APP} that a Spring Cloud
// Eureka client reads, decoded from the server's raw JSON (not through
// Eurekube's own client, so a test sees what Spring sees).
type SpringInstance struct {
	InstanceID     string            `json:"instanceId"`
	HostName       string            `json:"hostName"`
	IPAddr         string            `json:"ipAddr"`
	VIPAddress     string            `json:"vipAddress"`
	Status         string            `json:"status"`
	Port           map[string]any    `json:"port"`
	DataCenterInfo map[string]any    `json:"dataCenterInfo"`
	Metadata       map[string]string `json:"metadata"`
	HomePageURL    string            `json:"homePageUrl"`
	StatusPageURL  string            `json:"statusPageUrl"`
	HealthCheckURL string            `json:"healthCheckUrl"`
	LeaseInfo      struct {
		// Milliseconds since the epoch, by the server's clock.
		RegistrationTimestamp int64 `json:"registrationTimestamp"`
		LastRenewalTimestamp  int64 `json:"lastRenewalTimestamp"`
	} `json:"leaseInfo"`
}

// RegisteredAt is when the server registered the instance (its lease
// began).
func (i SpringInstance) RegisteredAt() time.Time {
	return time.UnixMilli(i.LeaseInfo.RegistrationTimestamp)
}

// LastRenewed is the lease's last renewal.
func (i SpringInstance) LastRenewed() time.Time {
	return time.UnixMilli(i.LeaseInfo.LastRenewalTimestamp)
}

// ReadInstance reads one instance straight from the server's registry
// (GET /apps/{APP}/{id} bypasses the response cache, whose copy of a
// lease's renewals may be minutes old).
func (e *Eureka) ReadInstance(app, id string) (SpringInstance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL()+"/apps/"+app+"/"+url.PathEscape(id), nil)
	if err != nil {
		return SpringInstance{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return SpringInstance{}, fmt.Errorf("GET /apps/%s/%s: %w", app, id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return SpringInstance{}, fmt.Errorf("GET /apps/%s/%s: HTTP %d", app, id, resp.StatusCode)
	}
	var body struct{ Instance SpringInstance }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return SpringInstance{}, fmt.Errorf("GET /apps/%s/%s: decode: %w", app, id, err)
	}
	return body.Instance, nil
}

// SpringRead lists app's instances the way a Spring client fetches them.
// An app the server does not know (404) has none.
func (e *Eureka) SpringRead(app string) ([]SpringInstance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL()+"/apps/"+app, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /apps/%s: %w", app, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /apps/%s: HTTP %d", app, resp.StatusCode)
	}
	var body struct {
		Application struct{ Instance []SpringInstance }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /apps/%s: decode: %w", app, err)
	}
	return body.Application.Instance, nil
}
