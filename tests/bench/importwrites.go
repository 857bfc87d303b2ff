package bench

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, and the manager still writes one per import for Spring Cloud Kubernetes' DiscoveryClient.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// bareImportWrites does, for sc's imports, what any controller of them
// cannot do without on its first pass, as the bench alone: it reads the
// whole registry once (the manager's first read is a full one), then, with
// the watches open that a controller of what it writes keeps (Services,
// Endpoints, EndpointSlices and imports, all namespaces), makes for each
// import the writes the manager makes, in its order, beside the manager's
// own objects: a selector-less Service (its ClusterIP allocated), its
// Endpoints, one EndpointSlice of the app's instances, an update adding a
// finalizer (made beside those three, as the manager makes its own), and a
// patch of the import's status once that update landed. The syncers' floor
// counts their finalizer the same way. Each write changes what is stored,
// on objects of the manager's size: the status patch holds the whole
// status the manager wrote, every condition and count, as its first write
// from an empty status does, with its times moved so that its conditions
// and sync time are stored anew. The imports are listed first, for their resource versions and
// statuses, as the manager's cache holds them. Only the manager's Event of
// the changed endpoints is left out.
func bareImportWrites(ctx context.Context, env *scaleEnv, sc Scenario) (bareWrites, error) {
	bare := bareWrites{what: "per import: create its Service, Endpoints and EndpointSlice, update it with a finalizer, patch its whole status", count: 5 * sc.ImportedApps}
	var list v1alpha1.EurekaImportList
	if err := env.k8s.List(ctx, &list); err != nil {
		return bare, fmt.Errorf("list the imports: %w", err)
	}
	imports := make(map[types.NamespacedName]*v1alpha1.EurekaImport, len(list.Items))
	for i := range list.Items {
		imports[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
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
		listed := imports[types.NamespacedName{Namespace: ns, Name: importedApp(i)}]
		if listed == nil {
			return fmt.Errorf("import %s/%s is not listed", ns, importedApp(i))
		}
		imp := listed.DeepCopy()
		controllerutil.AddFinalizer(imp, bareFinalizer)
		finalized := make(chan error, 1)
		go func() { finalized <- env.k8s.Update(ctx, imp) }()
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
				<-finalized
				return fmt.Errorf("create %T %s/%s: %w", obj, ns, name, err)
			}
		}
		if err := <-finalized; err != nil {
			return fmt.Errorf("update import %s/%s with a finalizer: %w", ns, imp.Name, err)
		}
		patch, err := rewrittenStatus(listed.Status, i)
		if err != nil {
			return fmt.Errorf("the status of import %s/%s: %w", ns, imp.Name, err)
		}
		if err := env.k8s.Status().Patch(ctx, imp, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("patch the status of import %s/%s: %w", ns, imp.Name, err)
		}
		return nil
	})
	bare.watches, bare.events = watching.kinds(), watching.stop()
	return bare, err
}

// rewrittenStatus is a merge patch of the whole of st, as the manager's
// first write of an import's status carries it, with its times moved (to
// i seconds into 2000) so that the conditions, which a merge patch
// replaces as one list, and the sync time are stored anew.
func rewrittenStatus(st v1alpha1.EurekaImportStatus, i int) ([]byte, error) {
	at := metav1.NewTime(time.Date(2000, 1, 1, 0, 0, i, 0, time.UTC))
	st.LastSyncTime = &at
	st.Conditions = slices.Clone(st.Conditions)
	for k := range st.Conditions {
		st.Conditions[k].LastTransitionTime = at
	}
	return json.Marshal(map[string]any{"status": st})
}
