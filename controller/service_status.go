package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// The status of a Service-mode syncer: status.serviceAddresses, READY as
// "instances UP / addresses registered", the ServiceReachable condition,
// and Synced read against the Service's ready endpoints instead of pods.

// Reasons of the Synced condition and events in Service mode.
const (
	reasonServiceRegistration = "ServiceSyncFailed"
	reasonNoReadyEndpoint     = "NoReadyEndpoint"
)

// applyServiceStatus writes what Service mode measured into next; for a
// Pod-mode syncer it removes what Service mode wrote. Addresses and READY
// keep their last measured value while Eureka does not answer.
func applyServiceStatus(s *v1alpha1.EurekaSyncer, obs *observed, next *v1alpha1.EurekaSyncerStatus) {
	svc := &obs.service
	if !svc.active {
		next.ServiceAddresses = nil
		meta.RemoveStatusCondition(&next.Conditions, v1alpha1.ConditionServiceReachable)
		return
	}
	if svc.synced {
		next.ServiceAddresses = svc.addresses
		up, _ := serviceCounts(obs)
		next.Ready = fmt.Sprintf("%d/%d", up, len(next.ServiceAddresses))
	} else {
		next.Ready = s.Status.Ready
	}
	if c, ok := serviceReachable(s, obs); ok {
		c.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&next.Conditions, c)
	}
}

// serviceCounts counts the Service's instances UP, and held
// OUT_OF_SERVICE, as they are after this pass (traffic applied).
func serviceCounts(obs *observed) (up, outOfService int32) {
	for i := range obs.instances {
		inst := &obs.instances[i]
		if !isServiceInstance(inst) {
			continue
		}
		switch inst.Status {
		case eureka.StatusUp:
			up++
		case eureka.StatusOutOfService:
			outOfService++
		}
	}
	return up, outOfService
}

// serviceReachable is the ServiceReachable condition, when the Service
// was looked at this pass (not while the syncer is deleted, nor when the
// cache failed).
func serviceReachable(s *v1alpha1.EurekaSyncer, obs *observed) (metav1.Condition, bool) {
	svc := &obs.service
	if !svc.resolved {
		return metav1.Condition{}, false
	}
	res := &svc.res
	if !res.reachable() {
		return metav1.Condition{Type: v1alpha1.ConditionServiceReachable, Status: metav1.ConditionFalse, Reason: res.reason, Message: truncate(res.message, 1024)}, true
	}
	return metav1.Condition{Type: v1alpha1.ConditionServiceReachable, Status: metav1.ConditionTrue, Reason: reasonServiceReachable,
		Message: truncate(fmt.Sprintf("Service %s is reachable at %d address(es) from its %s; %d ready endpoint(s)",
			s.Spec.Service.Name, len(res.addresses), res.source, res.readyEndpoints), 1024)}, true
}

// serviceSynced is Synced in Service mode: Eureka agrees with Kubernetes
// when every address VMs reach the Service at is registered, UP while the
// Service has a ready endpoint (held OUT_OF_SERVICE in Standby). It is
// never True while no instance is UP.
func serviceSynced(s *v1alpha1.EurekaSyncer, obs *observed) metav1.Condition {
	svc := &obs.service
	c := metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse}
	registered := int32(len(svc.addresses))
	inService, held := serviceCounts(obs)
	standby := s.EffectiveTraffic() == v1alpha1.TrafficStandby
	if standby {
		inService += held
	}
	switch {
	case svc.err != nil:
		c.Reason, c.Message = reasonServiceRegistration, truncate(svc.err.Error(), 1024)
	case svc.resolved && !svc.res.reachable():
		c.Reason, c.Message = svc.res.reason, "nothing is registered: see the ServiceReachable condition"
	case svc.resolved && svc.res.readyEndpoints == 0:
		c.Reason = reasonNoReadyEndpoint
		c.Message = fmt.Sprintf("Service %s has no ready endpoint: its %d instance(s) are registered DOWN until one is ready", s.Spec.Service.Name, registered)
	case registered == 0 || inService < registered:
		c.Reason = reasonNotAllRegistered
		c.Message = fmt.Sprintf("%d of %d address(es) of Service %s registered UP in Eureka", inService, len(svc.res.addresses), s.Spec.Service.Name)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, reasonInSync
		c.Message = fmt.Sprintf("Service %s registered UP at %d address(es)", s.Spec.Service.Name, registered)
		if standby {
			c.Message = fmt.Sprintf("Service %s registered at %d address(es), held OUT_OF_SERVICE (Standby)", s.Spec.Service.Name, registered)
		}
	}
	return c
}
