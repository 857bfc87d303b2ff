package sidecar

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/eurekube/eurekube/eureka"
)

// InstanceID is Spring's default shape, <host>:<app>:<port>, with
// <pod>.<namespace>.<the first 8 characters of the pod UID> as host. The
// pod name alone repeats when one Deployment runs in two namespaces or two
// clusters sharing a Eureka server (StatefulSet pods, and a Deployment's
// pods by chance, have the same name there), and two instances with one id
// overwrite each other's registration; the namespace and the UID's prefix
// make it unique while it stays readable in the Eureka dashboard.
func (c *Config) InstanceID() string {
	uid := c.PodUID
	if len(uid) > instanceIDUIDLength {
		uid = uid[:instanceIDUIDLength]
	}
	return fmt.Sprintf("%s.%s.%s:%s:%d", c.PodName, c.PodNamespace, uid, strings.ToLower(c.AppName), c.Port)
}

// instanceIDUIDLength is how much of the pod UID the instance id carries:
// 8 hex digits of a random UUID make a clash between two pods of the same
// name and namespace (in two clusters) a one in four billion chance.
const instanceIDUIDLength = 8

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
