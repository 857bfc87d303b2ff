package controller_test

//lint:file-ignore SA1019 an import keeps core/v1 Endpoints, which Spring Cloud Kubernetes reads.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// The Service an import keeps carries what the import asks for, and only
// that: labels and annotations (another's stay, its own taken out go),
// appProtocol on the Service's and the slices' ports, session affinity,
// zone hints only with trafficDistribution, both IP families where the
// cluster has them, and the Endpoints only while legacyEndpoints is on.
func TestImport_TheServiceCarriesWhatTheImportAsksForAndNoMore(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "FIELDS-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, c, app, "vm-1:fields:8080", "10.24.0.1", eureka.StatusUp, "zone-a")
	vm(t, c, app, "vm-2:fields:8080", "10.24.0.2", eureka.StatusUp, "zone-b")
	imp := newImport(t, ns, app, func(s *v1alpha1.EurekaImportSpec) {
		s.Service.Labels = map[string]v1alpha1.LabelValue{"team": "payments", "secured": "true"}
		s.Service.Annotations = map[string]v1alpha1.AnnotationValue{"example.com/owner": "payments@example.com"}
		s.Service.Ports = []v1alpha1.ImportPort{{Name: "http", Port: 80, AppProtocol: "http"}}
		s.Service.SessionAffinity = corev1.ServiceAffinityClientIP
	})
	service := strings.ToLower(app)
	key := client.ObjectKey{Namespace: ns, Name: service}
	slicesOf := func() ([]discoveryv1.EndpointSlice, error) {
		var list discoveryv1.EndpointSliceList
		err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service})
		return list.Items, err
	}
	harness.Eventually(t, patience, "the Service as asked, zones without hints", func() error {
		var svc corev1.Service
		if err := k8s.Get(context.Background(), key, &svc); err != nil {
			return err
		}
		if svc.Labels["team"] != "payments" || svc.Labels["secured"] != "true" || svc.Annotations["example.com/owner"] != "payments@example.com" {
			return fmt.Errorf("labels %v annotations %v", svc.Labels, svc.Annotations)
		}
		if len(svc.Spec.Ports) != 1 || ptr.Deref(svc.Spec.Ports[0].AppProtocol, "") != "http" {
			return fmt.Errorf("ports %+v", svc.Spec.Ports)
		}
		if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || svc.Spec.SessionAffinityConfig == nil ||
			ptr.Deref(svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, 0) != corev1.DefaultClientIPServiceAffinitySeconds {
			return fmt.Errorf("affinity %s %+v", svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig)
		}
		if ptr.Deref(svc.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyPreferDualStack || svc.Spec.TrafficDistribution != nil {
			return fmt.Errorf("ipFamilyPolicy %v trafficDistribution %v", svc.Spec.IPFamilyPolicy, svc.Spec.TrafficDistribution)
		}
		slices, err := slicesOf()
		if err != nil || len(slices) != 1 || len(slices[0].Endpoints) != 2 {
			return fmt.Errorf("slices %d (%v)", len(slices), err)
		}
		if ptr.Deref(slices[0].Ports[0].AppProtocol, "") != "http" {
			return fmt.Errorf("slice port %+v", slices[0].Ports[0])
		}
		for _, ep := range slices[0].Endpoints {
			if ep.Zone == nil || ep.Hints != nil {
				return fmt.Errorf("endpoint %s zone %v hints %+v: want a zone and no hints", ep.Addresses[0], ep.Zone, ep.Hints)
			}
		}
		return nil
	})

	// Someone else's label stays; the import's own, taken out of its spec,
	// goes; zone routing asked for writes hints; no Endpoints asked for
	// removes it.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var svc corev1.Service
		if err := k8s.Get(context.Background(), key, &svc); err != nil {
			return err
		}
		svc.Labels["added-by"] = "someone-else"
		return k8s.Update(context.Background(), &svc)
	}); err != nil {
		t.Fatal(err)
	}
	editImport(t, imp, func(s *v1alpha1.EurekaImportSpec) {
		delete(s.Service.Labels, "secured")
		s.Service.Annotations = nil
		s.Service.TrafficDistribution = "PreferClose"
		s.Service.LegacyEndpoints = ptr.To(false)
	})
	harness.Eventually(t, patience, "labels as now asked, hints, no Endpoints", func() error {
		var svc corev1.Service
		if err := k8s.Get(context.Background(), key, &svc); err != nil {
			return err
		}
		if _, ok := svc.Labels["secured"]; ok || svc.Labels["team"] != "payments" || svc.Labels["added-by"] != "someone-else" {
			return fmt.Errorf("labels %v: want team, added-by, and no secured", svc.Labels)
		}
		if _, ok := svc.Annotations["example.com/owner"]; ok {
			return fmt.Errorf("annotations %v", svc.Annotations)
		}
		if ptr.Deref(svc.Spec.TrafficDistribution, "") != "PreferClose" {
			return fmt.Errorf("trafficDistribution %v", svc.Spec.TrafficDistribution)
		}
		slices, err := slicesOf()
		if err != nil || len(slices) != 1 {
			return fmt.Errorf("slices %d (%v)", len(slices), err)
		}
		for _, ep := range slices[0].Endpoints {
			if ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != *ep.Zone {
				return fmt.Errorf("endpoint %s zone %v hints %+v", ep.Addresses[0], ep.Zone, ep.Hints)
			}
		}
		var eps corev1.Endpoints
		if err := k8s.Get(context.Background(), key, &eps); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Endpoints is still there (%v)", err)
		}
		return nil
	})
	editImport(t, imp, func(s *v1alpha1.EurekaImportSpec) { s.Service.LegacyEndpoints = nil })
	harness.Eventually(t, patience, "the Endpoints back", wantEndpointsObject(ns, service, imp, map[string]bool{"10.24.0.1": true, "10.24.0.2": true}))
}

// editImport changes an import's spec, retrying on conflicts.
func editImport(t *testing.T, imp *v1alpha1.EurekaImport, edit func(*v1alpha1.EurekaImportSpec)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var got v1alpha1.EurekaImport
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(imp), &got); err != nil {
			return err
		}
		edit(&got.Spec)
		return k8s.Update(context.Background(), &got)
	}); err != nil {
		t.Fatal(err)
	}
}

// What the CRD takes as a Service's labels and annotations is what the
// API server takes on the Service, less the keys of Kubernetes and
// Eurekube: a label is refused where it is typed, never first found bad
// by a failed write of the Service. Over generated keys and values.
func TestImport_TheCRDTakesTheLabelsTheServiceTakes(t *testing.T) {
	ns := newNamespace(t)
	r := rand.New(rand.NewPCG(42, 42))
	const chars = "abcXYZ019-_./"
	word := func(n int) string {
		b := make([]byte, r.IntN(n+1))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		return string(b)
	}
	keys := []string{"team", "app.kubernetes.io/name", "kubernetes.io/x", "eurekube.io/import", "x.eurekube.io/y", "k8s.io/z", "example.com/team",
		"service.kubernetes.io/service-proxy-name", "endpointslice.kubernetes.io/managed-by", "external-dns.alpha.kubernetes.io/hostname",
		"-bad", "bad-", "a/b/c", strings.Repeat("k", 63), strings.Repeat("k", 64), strings.Repeat("d", 254) + "/k", "Example.com/k", "example..com/k"}
	values := []string{"", "v", "-v", "v-", strings.Repeat("v", 63), strings.Repeat("v", 64), "a b", "A.b_c-d"}
	for i := range 60 {
		k, v := keys[r.IntN(len(keys))], values[r.IntN(len(values))]
		if i%2 == 0 {
			k, v = word(12), word(8)
		}
		reserved := strings.Contains(k, "/") && func(prefix string) bool {
			switch prefix {
			case "eurekube.io", "kubernetes.io", "service.kubernetes.io", "endpointslice.kubernetes.io":
				return true
			}
			return strings.HasSuffix(prefix, ".eurekube.io")
		}(k[:strings.Index(k, "/")])
		labelOK := len(metavalidation.ValidateLabels(map[string]string{k: v}, field.NewPath("labels"))) == 0 && !reserved
		annotationOK := len(apivalidation.ValidateAnnotations(map[string]string{k: v}, field.NewPath("annotations"))) == 0 && !reserved
		for _, kind := range []string{"label", "annotation"} {
			imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("labels-%d-%s", i, kind)}, Spec: v1alpha1.EurekaImportSpec{App: "LABELS"}}
			want := labelOK
			if kind == "label" {
				imp.Spec.Service.Labels = map[string]v1alpha1.LabelValue{k: v1alpha1.LabelValue(v)}
			} else {
				imp.Spec.Service.Annotations = map[string]v1alpha1.AnnotationValue{k: v1alpha1.AnnotationValue(v)}
				want = annotationOK
			}
			err := k8s.Create(context.Background(), imp, client.DryRunAll)
			if (err == nil) != want {
				t.Errorf("%s %q=%q: the CRD says %v, the Service would take it: %v", kind, k, v, err, want)
			}
		}
	}
	for timeout, ok := range map[int32]bool{0: false, -1: false, 1: true, 86400: true, 86401: false} {
		imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("affinity-%d", timeout+1)}, Spec: v1alpha1.EurekaImportSpec{App: "LABELS",
			Service: v1alpha1.ImportService{SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}}}}
		if err := k8s.Create(context.Background(), imp, client.DryRunAll); (err == nil) != ok {
			t.Errorf("ClientIP affinity for %d s: the CRD says %v, the Service would take it: %v", timeout, err, ok)
		}
	}
	long := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("i", 64)}, Spec: v1alpha1.EurekaImportSpec{App: "LABELS"}}
	if err := k8s.Create(context.Background(), long, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "at most 63") {
		t.Errorf("an import named with 64 characters: %v, want refused", err)
	}
}

// A read that lists none of an app's instances while its import had
// endpoints (a Eureka server restarted empty) does not empty the import at
// once: the endpoints stay while the condition says so, and are never
// gone if the instances come back within the hold; past it, they go.
func TestImport_AnEmptiedReadKeepsTheEndpointsForAHold(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "EMPTIED-" + strings.ToUpper(ns[len(ns)-5:])
	inst := vm(t, c, app, "vm-1:emptied:8080", "10.25.0.1", eureka.StatusUp, "")
	imp := newImport(t, ns, app, nil)
	service := strings.ToLower(app)
	harness.Eventually(t, patience, "the VM imported", wantEndpoints(ns, service, map[string]bool{"10.25.0.1": true}))

	held := func() error {
		if err := wantEndpoints(ns, service, map[string]bool{"10.25.0.1": true})(); err != nil {
			return fmt.Errorf("emptied during the hold: %w", err)
		}
		return nil
	}
	if err := c.Cancel(context.Background(), app, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "Synced False RegistryEmptied, the endpoint kept", func() error {
		if err := held(); err != nil {
			t.Fatal(err) // Eventually polls in the test's goroutine
		}
		return wantImportCondition(imp, v1alpha1.ConditionSynced, func(c *metav1.Condition) bool {
			return c.Reason == v1alpha1.ReasonRegistryEmptied && strings.Contains(c.Message, "kept as last written until")
		})()
	})
	if err := c.Register(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "Synced again, never emptied", func() error {
		if err := held(); err != nil {
			t.Fatal(err) // Eventually polls in the test's goroutine
		}
		return wantImportCondition(imp, v1alpha1.ConditionSynced, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })()
	})
	// Gone for longer than the hold: emptied.
	if err := c.Cancel(context.Background(), app, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience+emptiedHold, "emptied once the hold is over", func() error {
		if err := wantImportCondition(imp, v1alpha1.ConditionSynced, func(c *metav1.Condition) bool { return c.Reason == "NoInstances" })(); err != nil {
			return err
		}
		return wantEndpoints(ns, service, map[string]bool{})()
	})
}

// A manager restarted while Eureka cannot be read still publishes the
// endpoints it serves as last written.
func TestImport_TheEndpointsGaugeOutlivesARestartDuringAnOutage(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "GAUGED-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, c, app, "vm-1:gauged:8080", "10.26.0.1", eureka.StatusUp, "")
	imp := newImport(t, ns, app, func(s *v1alpha1.EurekaImportSpec) {
		s.Eureka.ServiceURLs = []string{"http://" + proxy.Addr() + "/eureka"}
	})
	harness.Eventually(t, patience, "the VM imported", wantEndpoints(ns, strings.ToLower(app), map[string]bool{"10.26.0.1": true}))
	proxy.Block()
	defer proxy.Unblock()
	harness.Eventually(t, patience, "EurekaReachable False", wantImportCondition(imp, v1alpha1.ConditionEurekaReachable, func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse
	}))
	controller.ForgetImportMetrics(ns, imp.Name) // as a restarted manager starts
	harness.Eventually(t, patience, "the gauge back, from the status", func() error {
		got, err := importGauge(ns, imp.Name)
		if err != nil || got["ready"] != 1 || got["total"] != 1 {
			return fmt.Errorf("eurekube_import_endpoints %v (%v)", got, err)
		}
		return nil
	})
}

// Instances the Service cannot serve are named with why, and the others
// are imported all the same: a host name for ipAddr (NoIPAddress, not
// PortMismatch), none of the Service's ports enabled, or both reasons.
func TestImport_InstancesTheServiceCannotServeAreNamedWithWhy(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "UNSERVED-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, c, app, "vm-7:unserved:8080", "vm-7.dc1.example.com", eureka.StatusUp, "")
	imp := newImport(t, ns, app, nil)
	harness.Eventually(t, patience, "Synced False NoIPAddress, the host name named", wantImportCondition(imp, v1alpha1.ConditionSynced, func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonNoIPAddress && strings.Contains(c.Message, `vm-7:unserved:8080 (ipAddr "vm-7.dc1.example.com" is not an IP address)`)
	}))
	vm(t, c, app, "vm-1:unserved:8080", "10.27.0.1", eureka.StatusUp, "")
	noPort := eureka.Instance{App: app, InstanceID: "vm-2:unserved", HostName: "10.27.0.2", IPAddr: "10.27.0.2", VIPAddress: strings.ToLower(app), Status: eureka.StatusUp, Metadata: map[string]string{}}
	if err := c.Register(context.Background(), noPort); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Cancel(context.Background(), app, noPort.InstanceID) })
	harness.Eventually(t, patience, "vm-1 imported, the others named", func() error {
		if err := wantEndpoints(ns, strings.ToLower(app), map[string]bool{"10.27.0.1": true})(); err != nil {
			return err
		}
		if err := wantImportCondition(imp, v1alpha1.ConditionSynced, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })(); err != nil {
			return err
		}
		return wantImportCondition(imp, v1alpha1.ConditionInstancesServed, func(c *metav1.Condition) bool {
			return c.Status == metav1.ConditionFalse && c.Reason == "SeveralReasons" && strings.Contains(c.Message, "vm-7.dc1.example.com") &&
				strings.Contains(c.Message, "vm-2:unserved (no enabled port for the Service's ports: none)")
		})()
	})
}
