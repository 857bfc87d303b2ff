package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
