package bench

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, and the manager still writes one per import for Spring Cloud Kubernetes' DiscoveryClient.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// bareImportWrites does, for sc's imports, what any controller of them
// cannot do without on its first pass, as the bench alone: it reads the
// whole registry once (the manager's first read is a full one), then, with
// the watches open that a controller of what it writes keeps (Services,
// Endpoints, EndpointSlices and imports, all namespaces), makes for each
// import the writes the manager makes, in its order, beside the manager's
// own objects: a selector-less Service (its ClusterIP allocated), its
// Endpoints, one EndpointSlice of the app's instances, and a patch of the
// import's status. The objects are of the manager's size.
func bareImportWrites(ctx context.Context, env *scaleEnv, sc Scenario) (bareWrites, error) {
	bare := bareWrites{what: "per import: create its Service, Endpoints and EndpointSlice, patch its status", count: 4 * sc.ImportedApps}
	start := time.Now()
	reg, err := env.eureka.Applications(ctx)
	if err != nil {
		return bare, fmt.Errorf("read the registry: %w", err)
	}
	bare.read, bare.readInstances = time.Since(start), reg.Len()
	watching, err := watchAll(ctx, env.cp.Config, env.cp.Scheme, &corev1.ServiceList{}, &corev1.EndpointsList{}, &discoveryv1.EndpointSliceList{}, &v1alpha1.EurekaImportList{})
	if err != nil {
		return bare, err
	}

	const prefix = "bare-"
	port := int32(importInstancePort)
	err = inParallel(ctx, sc.ImportedApps, func(i int) error {
		ns, name := importNamespace(i%sc.Namespaces), prefix+importedApp(i)
		labels := map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "bench"}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}}}}
		eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}}}}}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}}}
		for k := i * sc.InstancesPerApp; k < (i+1)*sc.InstancesPerApp; k++ {
			inst := vmInstance(i, k)
			eps.Subsets[0].Addresses = append(eps.Subsets[0].Addresses, corev1.EndpointAddress{IP: inst.IPAddr})
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{inst.IPAddr},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
		}
		for _, obj := range []client.Object{svc, eps, slice} {
			if err := env.k8s.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %T %s/%s: %w", obj, ns, name, err)
			}
		}
		// A status that differs from the stored one, so that it is
		// written.
		patch := fmt.Sprintf(`{"status":{"lastSyncTime":%q}}`, time.Date(2000, 1, 1, 0, 0, i, 0, time.UTC).Format(time.RFC3339))
		imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: importedApp(i)}}
		if err := env.k8s.Status().Patch(ctx, imp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return fmt.Errorf("patch the status of import %s/%s: %w", ns, imp.Name, err)
		}
		return nil
	})
	bare.watches, bare.events = watching.kinds(), watching.stop()
	return bare, err
}
