package sidecar

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/eurekube/eurekube/eureka"
)

// InstanceID is Spring's default shape, <host>:<app>:<port>, with the pod
// name as host: unique per pod and readable in the Eureka dashboard.
func (c *Config) InstanceID() string {
	return fmt.Sprintf("%s:%s:%d", c.PodName, strings.ToLower(c.AppName), c.Port)
}

// Instance is the pod's registration with the given status. hostName is the
// pod IP, because Spring clients call hostName.
func (c *Config) Instance(status eureka.Status) eureka.Instance {
	base := "http://" + net.JoinHostPort(c.PodIP, strconv.Itoa(c.Port))
	health := base + "/"
	if c.Health.Type == HealthHTTP {
		health = c.Health.Scheme + "://" + net.JoinHostPort(c.PodIP, strconv.Itoa(c.Health.Port)) + c.Health.Path
	}
	meta := make(map[string]string, len(c.Metadata)+6)
	for k, v := range c.Metadata {
		meta[k] = v
	}
	// The ownership markers come last so that no user metadata can forge
	// them: the reconciler deletes only what carries its own markers.
	meta[eureka.MetaManagedBy] = eureka.ManagedByValue
	meta[eureka.MetaCluster] = c.ClusterID
	meta[eureka.MetaNamespace] = c.PodNamespace
	meta[eureka.MetaPod] = c.PodName
	meta[eureka.MetaPodUID] = c.PodUID
	meta[eureka.MetaSyncer] = c.Syncer
	return eureka.Instance{
		App:               strings.ToUpper(c.AppName),
		InstanceID:        c.InstanceID(),
		HostName:          c.PodIP,
		IPAddr:            c.PodIP,
		VIPAddress:        c.VIPAddress,
		SecureVIPAddress:  c.SecureVIPAddress,
		Status:            status,
		Port:              c.Port,
		PortEnabled:       true,
		SecurePort:        c.SecurePort,
		SecurePortEnabled: c.SecurePort != 0,
		HomePageURL:       base + "/",
		StatusPageURL:     base + "/",
		HealthCheckURL:    health,
		RenewalInterval:   c.RenewalInterval,
		Duration:          c.LeaseDuration,
		Metadata:          meta,
	}
}
