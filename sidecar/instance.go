package sidecar

import (
	"cmp"
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
	return fmt.Sprintf("%s%s:%d", InstanceIDPrefix(c.PodName, c.PodNamespace, c.PodUID), strings.ToLower(c.AppName), c.Port)
}

// InstanceIDPrefix is how every instance id of a pod's registrar begins,
// "<pod>.<namespace>.<UID prefix>:": what Eurekube's gateway holds a pod's
// writes to.
func InstanceIDPrefix(pod, namespace, uid string) string {
	if len(uid) > instanceIDUIDLength {
		uid = uid[:instanceIDUIDLength]
	}
	return pod + "." + namespace + "." + uid + ":"
}

// instanceIDUIDLength is how much of the pod UID the instance id carries:
// 8 hex digits of a random UUID make a clash between two pods of the same
// name and namespace (in two clusters) a one in four billion chance.
const instanceIDUIDLength = 8

// Metadata keys Spring tools read (Spring Cloud's Eureka client writes the
// same ones for its apps): the zone Spring Cloud LoadBalancer's zone
// preference compares with the caller's, and where Spring Boot Admin finds
// the actuator when it has a port or path of its own.
const (
	MetaZone                  = "zone"
	MetaManagementPort        = "management.port"
	MetaManagementContextPath = "management.context-path"
	MetaManagementScheme      = "management.scheme"
)

// Markers say who registered an instance: this cluster, the syncer's
// namespace and name, and the pod (a registrar) or the Service (a
// Service-mode syncer). The reconciler touches only instances that carry
// its own cluster's markers.
type Markers struct {
	Cluster, Namespace, Syncer string
	// Pod and PodUID name a registrar's pod; Service, a Service-mode
	// syncer's Service. The unset ones are left out.
	Pod, PodUID, Service string
}

// Instance is the pod's registration with the given status. hostName is the
// pod IP, because Spring clients call hostName.
func (c *Config) Instance(status eureka.Status) eureka.Instance {
	return c.Shape(c.InstanceID(), status, Markers{Cluster: c.ClusterID, Namespace: c.PodNamespace, Syncer: c.Syncer, Pod: c.PodName, PodUID: c.PodUID})
}

// Shape is the one home of an instance's shape, whoever registers it: a
// pod's registrar (Instance) or the reconciler for a Service-mode syncer's
// Service at one address (PodIP then holds the address). It carries the
// app upper-cased, the address as hostName and ipAddr (Spring clients call
// hostName), the VIP addresses, the ports, the lease, an HTTP app's URLs
// and management metadata (what Spring tools read), the user's metadata,
// and the markers last, so that no user metadata can forge them.
func (c *Config) Shape(id string, status eureka.Status, m Markers) eureka.Instance {
	meta := make(map[string]string, len(c.Metadata)+10)
	if c.Protocol == ProtocolHTTP {
		c.AddManagementMetadata(meta)
	}
	for k, v := range c.Metadata {
		meta[k] = v
	}
	meta[eureka.MetaManagedBy] = eureka.ManagedByValue
	meta[eureka.MetaCluster] = m.Cluster
	meta[eureka.MetaNamespace] = m.Namespace
	meta[eureka.MetaSyncer] = m.Syncer
	for key, value := range map[string]string{eureka.MetaPod: m.Pod, eureka.MetaPodUID: m.PodUID, eureka.MetaService: m.Service} {
		if value != "" {
			meta[key] = value
		}
	}
	inst := eureka.Instance{
		App:               strings.ToUpper(c.AppName),
		InstanceID:        id,
		HostName:          c.PodIP,
		IPAddr:            c.PodIP,
		VIPAddress:        c.VIPAddress,
		SecureVIPAddress:  c.SecureVIPAddress,
		Status:            status,
		Port:              c.Port,
		PortEnabled:       true,
		SecurePort:        c.SecurePort,
		SecurePortEnabled: c.SecurePort != 0,
		RenewalInterval:   c.RenewalInterval,
		Duration:          c.LeaseDuration,
		Metadata:          meta,
	}
	if c.Protocol == ProtocolHTTP {
		inst.HomePageURL, inst.StatusPageURL, inst.HealthCheckURL = c.URLs()
	}
	return inst
}

// URLs are an HTTP instance's home page (the registered port's root at
// PodIP), its status page (the actuator's info) and its health check: the
// actuator's health, unless the registrar probes an HTTP path outside the
// actuator (an app without one), which is then the truer health URL. The
// reconciler uses them too, for a Service's address in Service mode.
func (c *Config) URLs() (home, status, health string) {
	home = "http://" + net.JoinHostPort(c.PodIP, strconv.Itoa(c.Port)) + "/"
	actuator := c.Management.Scheme + "://" + net.JoinHostPort(c.PodIP, strconv.Itoa(c.Management.Port)) +
		strings.TrimSuffix(c.Management.BasePath, "/")
	health = actuator + "/health"
	if h := c.Health; h.Type == HealthHTTP && !(h.Port == c.Management.Port && c.probesActuatorHealth()) {
		health = h.Scheme + "://" + net.JoinHostPort(c.PodIP, strconv.Itoa(h.Port)) + h.Path
	}
	return home, actuator + "/info", health
}

// ActuatorBase is the actuator's base path when path is its health
// endpoint or one of its groups ("/actuator/health/readiness": "/actuator";
// "/health": "/"), and false for any other path.
func ActuatorBase(path string) (string, bool) {
	i := strings.LastIndex(path, "/health")
	if i < 0 {
		return "", false
	}
	if rest := path[i+len("/health"):]; rest != "" && !strings.HasPrefix(rest, "/") {
		return "", false
	}
	return cmp.Or(path[:i], "/"), true
}

// probesActuatorHealth is true when the registrar's HTTP health check is
// the actuator's health endpoint or one of its groups.
func (c *Config) probesActuatorHealth() bool {
	base, ok := ActuatorBase(c.Health.Path)
	return ok && strings.TrimSuffix(base, "/") == strings.TrimSuffix(c.Management.BasePath, "/")
}

// AddManagementMetadata adds what Spring Boot Admin needs to find an
// actuator that does not answer on the registered port under /actuator.
func (c *Config) AddManagementMetadata(meta map[string]string) {
	m := c.Management
	if m.Port != c.Port {
		meta[MetaManagementPort] = strconv.Itoa(m.Port)
	}
	if m.Port != c.Port || m.BasePath != DefaultManagementBasePath {
		meta[MetaManagementContextPath] = m.BasePath
	}
	if m.Scheme != "http" {
		meta[MetaManagementScheme] = m.Scheme
	}
}
