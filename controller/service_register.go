package controller

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// Registration of a Service-mode syncer's instances: what they are (pure)
// and bringing Eureka to them (the I/O).

// serviceInstanceID is the Eureka instance id of the registration of a
// Service at one address: Spring's <host>:<app>:<port> shape, followed by
// <service>.<namespace>.<the first 8 hex digits of the cluster id's
// SHA-256>, e.g. 203.0.113.7:orders:80:orders.shop.3f2a9c1e (a hash: two
// cluster ids may share a prefix, such as prod-eu-1 and prod-eu-2). It reads well in the Eureka
// dashboard, is unique across namespaces and across clusters that share
// one Eureka (the same address may front two clusters' Services during a
// migration), and holds no '/' (it is a segment of Eureka's URLs).
func serviceInstanceID(addr serviceAddress, app, service, namespace, clusterID string) string {
	sum := sha256.Sum256([]byte(clusterID))
	cluster := hex.EncodeToString(sum[:4])
	id := fmt.Sprintf("%s:%s:%d:%s.%s.%s", addr.Host, strings.ToLower(app), addr.Port, service, namespace, cluster)
	return strings.ReplaceAll(id, "/", "-")
}

// serviceInstances are the instances that register a Service-mode syncer's
// Service at the resolved addresses: none when VMs cannot reach it. They
// are UP while the Service has a ready endpoint and DOWN otherwise, and
// carry the OUT_OF_SERVICE override in Standby so that they are out of
// traffic from their first registration.
func serviceInstances(s *v1alpha1.EurekaSyncer, res serviceResolution, clusterID string) []eureka.Instance {
	if !res.reachable() || s.Spec.Service == nil {
		return nil
	}
	app := s.EffectiveAppName()
	status := eureka.StatusUp
	if res.readyEndpoints == 0 {
		status = eureka.StatusDown
	}
	var override eureka.Status
	if s.EffectiveTraffic() == v1alpha1.TrafficStandby {
		override = eureka.StatusOutOfService
	}
	out := make([]eureka.Instance, 0, len(res.addresses))
	for _, addr := range res.addresses {
		// The registrar's settings and shape for the Service at this
		// address: a caller, Spring Boot Admin or the Eureka dashboard
		// finds the app the same way whichever mode registers it.
		rc := sidecar.Defaults(app, int(addr.Port))
		rc.PodIP, rc.Protocol = addr.Host, serviceProtocol(s, res.port)
		if m := s.Spec.Management; m != nil && m.BasePath != "" {
			rc.Management.BasePath = m.BasePath
		}
		rc.VIPAddress = cmp.Or(s.Spec.VIPAddress, rc.VIPAddress)
		rc.SecureVIPAddress = cmp.Or(s.Spec.SecureVIPAddress, rc.SecureVIPAddress)
		rc.Metadata = s.Spec.Metadata
		if n := s.Spec.Lease.RenewalIntervalSeconds; n > 0 {
			rc.RenewalInterval = time.Duration(n) * time.Second
		}
		if n := s.Spec.Lease.DurationSeconds; n > 0 {
			rc.LeaseDuration = time.Duration(n) * time.Second
		}
		inst := rc.Shape(serviceInstanceID(addr, app, s.Spec.Service.Name, s.Namespace, clusterID), status,
			sidecar.Markers{Cluster: clusterID, Namespace: s.Namespace, Syncer: s.Name, Service: s.Spec.Service.Name})
		inst.OverriddenStatus = override
		out = append(out, inst)
	}
	return out
}

// serviceProtocol is spec.protocol, else TCP when the Service port's name
// or appProtocol says so (as a container port's name does in Pod mode),
// else HTTP.
func serviceProtocol(s *v1alpha1.EurekaSyncer, port corev1.ServicePort) string {
	nonHTTP := v1alpha1.NonHTTPPortName(port.Name) || (port.AppProtocol != nil && v1alpha1.NonHTTPPortName(*port.AppProtocol))
	return sidecar.ProtocolFor(v1alpha1.EffectiveProtocol(nonHTTP, s.Spec.Protocol) == v1alpha1.ProtocolTCP)
}

// sameRegistration is true when have (as Eureka lists it, or as this
// manager last registered it) needs no new registration to become want.
// The override is left out: spec.traffic changes it through Eureka's status
// override (traffic.go), not by registering again.
func sameRegistration(have, want *eureka.Instance) bool {
	status := have.Status
	if status == eureka.StatusOutOfService && want.Status == eureka.StatusUp {
		status = eureka.StatusUp // an override hides only UP
	}
	return have.HostName == want.HostName && have.IPAddr == want.IPAddr && have.Port == want.Port && have.PortEnabled == want.PortEnabled &&
		strings.EqualFold(have.VIPAddress, want.VIPAddress) && strings.EqualFold(have.SecureVIPAddress, want.SecureVIPAddress) &&
		status == want.Status && have.HomePageURL == want.HomePageURL && have.StatusPageURL == want.StatusPageURL && have.HealthCheckURL == want.HealthCheckURL &&
		(have.RenewalInterval == 0 || have.RenewalInterval == want.RenewalInterval) && (have.Duration == 0 || have.Duration == want.Duration) &&
		maps.Equal(have.Metadata, want.Metadata)
}

// asListed is inst as Eureka lists it once registered: an OUT_OF_SERVICE
// override shows instead of UP.
func asListed(inst eureka.Instance) eureka.Instance {
	if inst.OverriddenStatus == eureka.StatusOutOfService && inst.Status == eureka.StatusUp {
		inst.Status = eureka.StatusOutOfService
	}
	return inst
}

// isServiceInstance: registered by the manager for a Service, not by a
// pod's registrar.
func isServiceInstance(inst *eureka.Instance) bool {
	return inst.Metadata[eureka.MetaService] != ""
}

// serviceSync is what bringing Eureka to the desired instances did.
type serviceSync struct {
	// registered: instances sent to Eureka this pass; cancelled: stale ones
	// removed.
	registered, cancelled []string
	// kept: the desired instances Eureka holds now, by id.
	kept map[string]bool
	err  error
}

// registerService brings this cluster's Service instances of the syncer in
// Eureka to want: it registers what the registry lacks or holds
// differently, hands the leases to the keeper, and cancels the Service
// instances that are no longer wanted. obs.instances is updated to what
// Eureka holds afterwards.
//
// The registry read behind obs.instances may be a resync (and Eureka's
// response cache) old, so an instance this manager registered since is
// trusted to be as registered; the keeper's heartbeats find out (and
// register again) if Eureka forgot it.
func (r *Reconciler) registerService(ctx context.Context, key types.NamespacedName, cl *eureka.Client, obs *observed, want []eureka.Instance) serviceSync {
	done := serviceSync{kept: map[string]bool{}}
	listed := map[string]int{} // id → index in obs.instances
	for i := range obs.instances {
		if isServiceInstance(&obs.instances[i]) {
			listed[obs.instances[i].InstanceID] = i
		}
	}
	held := r.leases.held(key)
	now := time.Now()
	var keep []eureka.Instance
	registeredNow := map[string]bool{}
	var errs []error
	for _, w := range want {
		h, isHeld := held[w.InstanceID]
		i, isListed := listed[w.InstanceID]
		switch {
		case isHeld && sameRegistration(&h, &w):
			w.LastDirtyTimestamp = h.LastDirtyTimestamp
		case !isHeld && isListed && sameRegistration(&obs.instances[i], &w):
			// Registered by a previous leader: adopt it. Its version
			// stamp is unknown, so heartbeats go without one.
		default:
			w.LastDirtyTimestamp = now
			if err := cl.Register(ctx, w); err != nil {
				errs = append(errs, fmt.Errorf("register %s: %w", w.InstanceID, err))
				continue
			}
			registeredNow[w.InstanceID] = true
			done.registered = append(done.registered, w.InstanceID)
		}
		keep = append(keep, w)
		done.kept[w.InstanceID] = true
		if !isListed || !sameRegistration(&obs.instances[i], &w) {
			obs.instances = append(obs.instances, asListed(w))
			if isListed {
				obs.instances[i].InstanceID = "" // replaced; dropped below
			}
		}
	}
	// The keeper lets go of what is no longer wanted before it is
	// cancelled, so no heartbeat registers it again.
	r.leases.hold(key, cl, keep, registeredNow)

	kept := obs.instances[:0]
	for _, inst := range obs.instances {
		switch {
		case inst.InstanceID == "":
			continue
		case !isServiceInstance(&inst) || done.kept[inst.InstanceID]:
			kept = append(kept, inst)
			continue
		}
		switch err := cl.Cancel(ctx, inst.App, inst.InstanceID); {
		case err == nil:
			done.cancelled = append(done.cancelled, inst.InstanceID)
		case errors.Is(err, eureka.ErrNotFound):
			// Gone already: the registry read was older than a cancel.
		default:
			errs = append(errs, fmt.Errorf("cancel %s: %w", inst.InstanceID, err))
			kept = append(kept, inst)
		}
	}
	obs.instances = kept
	done.err = errors.Join(errs...)
	return done
}
