package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// Service mode against the real API server and Eureka. No
// kube-controller-manager runs, so each test plays its controllers: it
// writes the EndpointSlices and Nodes, and the load balancer's ingress as a
// cloud controller would (newService, setEndpoints, newNode: helpers_test.go).

func TestServiceMode_LoadBalancerRegistersItsIngressUpWhileAnEndpointIsReady(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "orders", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.7"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "orders", "orders", nil)
	foreign(t, c, s)
	otherClusterService(t, c, s, "198.51.100.7")

	got := wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.7:80")
	inst := got["198.51.100.7:80"]
	want := map[string]string{"zone": "k8s-1", eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: clusterID,
		eureka.MetaNamespace: ns, eureka.MetaSyncer: "orders", eureka.MetaService: "orders"}
	if !inst.HasMetadata(want) || inst.Metadata[eureka.MetaPodUID] != "" || inst.IPAddr != "198.51.100.7" || inst.VIPAddress != "orders" ||
		!strings.HasPrefix(inst.InstanceID, "198.51.100.7:orders:80:orders."+ns+".") {
		t.Fatalf("instance %+v", inst)
	}
	// As Spring Boot Admin and the dashboard follow them, read back from Eureka.
	if inst.HomePageURL != "http://198.51.100.7:80/" || inst.StatusPageURL != "http://198.51.100.7:80/actuator/info" || inst.HealthCheckURL != "http://198.51.100.7:80/actuator/health" {
		t.Errorf("URLs %q %q %q, want the address's root and the actuator's info and health", inst.HomePageURL, inst.StatusPageURL, inst.HealthCheckURL)
	}
	harness.Eventually(t, patience, "READY 1/1, Synced, no pod counted", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		if st.Status.Ready != "1/1" || st.Status.SelectedPods != 0 || st.Status.ReadyPods != 0 || !meta.IsStatusConditionTrue(st.Status.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("status %+v", st.Status)
		}
		return nil
	})

	setEndpoints(t, svc, false)
	wantRegistered(t, c, s, eureka.StatusDown, "198.51.100.7:80")
	harness.Eventually(t, patience, "READY 0/1, Synced False/NoReadyEndpoint", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionSynced)
		if st.Status.Ready != "0/1" || cond == nil || cond.Reason != "NoReadyEndpoint" {
			return fmt.Errorf("READY %s, Synced %+v", st.Status.Ready, cond)
		}
		return nil
	})

	setEndpoints(t, svc, true)
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.7:80")

	// The Service goes: its instance is cancelled.
	if err := k8s.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	wantUnreachable(t, c, s, "ServiceNotFound")
}

func TestServiceMode_NodePortRegistersEveryReadyNodesAddress(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	newNode(t, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.21"}, true)
	later := newNode(t, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.77.22"}, false)
	svc := newService(t, ns, "payments", corev1.ServiceTypeNodePort)
	setEndpoints(t, svc, true)
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	s := newServiceSyncer(t, ns, "payments", "payments", func(spec *v1alpha1.EurekaSyncerSpec) { spec.Port = intstr.FromString("http") })

	// Other tests' nodes may be Ready too: every Ready node with an
	// address counts, the one that is not Ready never.
	readyAddresses := func() []string {
		var nodes corev1.NodeList
		if err := k8s.List(context.Background(), &nodes); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range nodes.Items {
			ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			})
			if ready && n.DeletionTimestamp == nil && len(n.Status.Addresses) > 0 {
				out = append(out, n.Status.Addresses[0].Address+":"+nodePort)
			}
		}
		return out
	}
	got := wantRegistered(t, c, s, eureka.StatusUp, readyAddresses()...)
	if _, ok := got["203.0.113.21:"+nodePort]; !ok {
		t.Fatalf("the Ready node is not registered: %v", got)
	}
	if _, ok := got["192.168.77.22:"+nodePort]; ok {
		t.Fatal("a node that is not Ready is registered")
	}

	setNodeReady(t, later, true) // a Node event reaches the syncer
	got = wantRegistered(t, c, s, eureka.StatusUp, readyAddresses()...)
	if _, ok := got["192.168.77.22:"+nodePort]; !ok {
		t.Fatalf("the node that became Ready is not registered: %v", got)
	}
}

func TestServiceMode_AnExplicitAddressWinsAndItsChangeCancelsTheOldOne(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "billing", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.9"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "billing", "billing", func(spec *v1alpha1.EurekaSyncerSpec) { spec.Service.Address = "billing.example.com" })
	got := wantRegistered(t, c, s, eureka.StatusUp, "billing.example.com:80")
	if inst := got["billing.example.com:80"]; inst.IPAddr != "billing.example.com" {
		t.Fatalf("a DNS name's ipAddr %q, want the name", inst.IPAddr)
	}

	current, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	current.Spec.Service.Address = "billing-2.example.com"
	if err := k8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, c, s, eureka.StatusUp, "billing-2.example.com:80")
}

func TestServiceMode_AMissingServiceRegistersNothing(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	s := newServiceSyncer(t, ns, "stock", "stock", nil)
	wantUnreachable(t, c, s, "ServiceNotFound")
	harness.Eventually(t, patience, "a Warning event ServiceNotFound", func() error {
		var list corev1.EventList
		if err := k8s.List(context.Background(), &list, &clientInNamespace{ns}); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == s.Name && e.Reason == "ServiceNotFound" && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no such event among %d", len(list.Items))
	})

	// The Service comes: a Service event reaches the syncer.
	svc := newService(t, ns, "stock", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{Hostname: "stock.lb.example.com"})
	setEndpoints(t, svc, true)
	wantRegistered(t, c, s, eureka.StatusUp, "stock.lb.example.com:80")
}

func TestServiceMode_AServiceWithoutAReachableAddressRegistersNothing(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "ledger", corev1.ServiceTypeClusterIP)
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "ledger", "ledger", nil)
	wantUnreachable(t, c, s, "NoReachableAddress")

	// A port the Service does not have.
	current, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	current.Spec.Port = intstr.FromString("grpc")
	if err := k8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	wantUnreachable(t, c, s, "PortNotFound")
}

func TestServiceMode_DeletingTheSyncerCancelsAndReleasesTheFinalizer(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "search", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.11"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "search", "search", nil)
	otherClusterService(t, c, s, "198.51.100.11")
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.11:80")

	if err := k8s.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the syncer gone, its instance cancelled", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there: %v", err)
		}
		got, err := serviceRegistrations(c, s)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("Eureka holds %v", got)
		}
		return nil
	})
}

func TestServiceMode_StandbyRegistersOutOfService(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "profile", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.13"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "profile", "profile", func(spec *v1alpha1.EurekaSyncerSpec) { spec.Traffic = v1alpha1.TrafficStandby })
	got := wantRegistered(t, c, s, eureka.StatusOutOfService, "198.51.100.13:80")
	if inst := got["198.51.100.13:80"]; inst.OverriddenStatus != eureka.StatusOutOfService {
		t.Fatalf("override %q, want OUT_OF_SERVICE", inst.OverriddenStatus)
	}
	harness.Eventually(t, patience, "READY 0/1, Synced (held on purpose)", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		if st.Status.Ready != "0/1" || !meta.IsStatusConditionTrue(st.Status.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("READY %s, conditions %+v", st.Status.Ready, st.Status.Conditions)
		}
		return nil
	})

	// Serve lets it in (the override removed, traffic.go).
	current, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	current.Spec.Traffic = v1alpha1.TrafficServe
	if err := k8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.13:80")
}

func TestServiceMode_AHeartbeatAnsweredNotFoundRegistersAgain(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "mail", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.15"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "mail", "mail", func(spec *v1alpha1.EurekaSyncerSpec) {
		spec.Lease = v1alpha1.Lease{RenewalIntervalSeconds: 1, DurationSeconds: 30}
	})
	got := wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.15:80")
	inst := got["198.51.100.15:80"]
	if err := c.Cancel(context.Background(), inst.App, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.15:80")

	// A 1 s renewal against the server's expected 30 s is registered as
	// asked, and explained.
	harness.Eventually(t, patience, "LeaseSafe False, explained", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionLeaseSafe)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "RenewsMoreOftenThanExpected" || !strings.Contains(cond.Message, "counts as 30 clients") {
			return fmt.Errorf("LeaseSafe %+v", cond)
		}
		return nil
	})
}
