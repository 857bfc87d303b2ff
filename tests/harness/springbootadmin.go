package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

var springBootAdminJar = springJar{
	name: "spring boot admin", env: "EUREKUBE_SPRING_BOOT_ADMIN_JAR", script: "tests/spring-boot-admin/build.sh", ready: "/instances",
}

// minStatusInterval is the shortest status interval that lets a health
// check answer: Spring Boot Admin times one out after the interval less a
// second.
const minStatusInterval = 2 * time.Second

// SpringBootAdminOptions configure StartSpringBootAdmin.
type SpringBootAdminOptions struct {
	// EurekaURL is the server it discovers instances through (Eureka.URL()).
	EurekaURL string
	// CacheSeconds is its Eureka client's registry fetch interval, how
	// soon it lists a new instance (default 30, Spring's default).
	CacheSeconds int
	// StatusInterval is how often it polls each instance's health URL
	// (default 10 s, Spring Boot Admin's; 2 s at least).
	StatusInterval time.Duration
	// LogDir receives spring-boot-admin-<port>.log.
	LogDir string
	// StartTimeout bounds the wait for /instances (default 5 min).
	StartTimeout time.Duration
}

// SpringBootAdmin is tests/spring-boot-admin running on 127.0.0.1: a real
// Spring Boot Admin server that finds the instances it monitors through
// Eureka and polls their health.
type SpringBootAdmin struct {
	*Process
	port int
}

// AdminInstance is one instance as Spring Boot Admin lists it.
type AdminInstance struct {
	// Name is the service's name, the Eureka app.
	Name string
	// HealthURL is what it polls: the instance's Eureka healthCheckUrl.
	HealthURL string
	// ManagementURL is the actuator's root, built from the instance's
	// address and its metadata management.port and
	// management.context-path.
	ManagementURL string
	ServiceURL    string
	// Status is what the last health poll answered (UP, DOWN, OFFLINE,
	// UNKNOWN, …).
	Status string
	// Details are the health's components (or, when the poll failed, why).
	Details map[string]any
}

// StartSpringBootAdmin builds (or finds cached) the Spring Boot Admin jar,
// starts it and waits until its /instances answers.
func StartSpringBootAdmin(ctx context.Context, o SpringBootAdminOptions) (*SpringBootAdmin, error) {
	if o.EurekaURL == "" || o.LogDir == "" {
		return nil, errors.New("spring boot admin: SpringBootAdminOptions needs an EurekaURL and a LogDir")
	}
	if o.CacheSeconds == 0 {
		o.CacheSeconds = 30
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.StatusInterval < minStatusInterval {
		return nil, fmt.Errorf("spring boot admin: StatusInterval %s is under %s: Spring Boot Admin times a health check out after the interval less a second", o.StatusInterval, minStatusInterval)
	}
	p, port, err := startSpringJar(ctx, springBootAdminJar, "127.0.0.1", o.LogDir, o.StartTimeout, nil, []string{
		"--eureka.client.service-url.defaultZone=" + o.EurekaURL,
		"--eurekube.client.cache-seconds=" + strconv.Itoa(o.CacheSeconds),
		"--spring.boot.admin.monitor.status-interval=" + strconv.FormatInt(o.StatusInterval.Milliseconds(), 10) + "ms",
	})
	if err != nil {
		return nil, err
	}
	return &SpringBootAdmin{Process: p, port: port}, nil
}

// URL is the server's root, where its REST API and UI are served.
func (a *SpringBootAdmin) URL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port))
}

// Instances reads the instances it lists (GET /instances).
func (a *SpringBootAdmin) Instances(ctx context.Context) ([]AdminInstance, error) {
	var body []struct {
		Registration struct {
			Name          string `json:"name"`
			HealthURL     string `json:"healthUrl"`
			ManagementURL string `json:"managementUrl"`
			ServiceURL    string `json:"serviceUrl"`
		} `json:"registration"`
		StatusInfo struct {
			Status  string         `json:"status"`
			Details map[string]any `json:"details"`
		} `json:"statusInfo"`
	}
	if err := getJSON(ctx, a.URL()+"/instances", &body); err != nil {
		return nil, fmt.Errorf("spring boot admin instances: %w", err)
	}
	insts := make([]AdminInstance, len(body))
	for i, b := range body {
		insts[i] = AdminInstance{
			Name: b.Registration.Name, HealthURL: b.Registration.HealthURL,
			ManagementURL: b.Registration.ManagementURL, ServiceURL: b.Registration.ServiceURL,
			Status: b.StatusInfo.Status, Details: b.StatusInfo.Details,
		}
	}
	return insts, nil
}
