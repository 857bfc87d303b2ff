package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

const statusHelp = `
Every EurekaSyncer with its migration view, across all namespaces unless
-n names one: where the app runs (READY: this cluster's instances UP in
Eureka / pods selected; ELSEWHERE: the app's instances UP / registered
outside this cluster, VMs and other clusters), how many selected pods run
the registrar (INJECTED), this cluster's instances in Eureka (REGISTERED),
whether the platform allows what the syncer asks for (PERMITTED: False
names the refusal's reason, such as AppOwnedByAnotherNamespace; the
syncer's Permitted condition says who owns the app and the fix) and
whether Eureka agrees with Kubernetes (SYNCED, never True while refused).
Every figure is the
syncer's status as the manager measured it at its last resync; nothing is
recomputed here. -o wide adds where calls go (CALLS-TO), the pods skipped,
owned by another syncer, without a drain or on an outdated registrar, the
last sync and the reason of Synced.

Then every EurekaImport, a Eureka app kept as a Service of its
namespace: the app (APP), the Service (SERVICE), its endpoints ready
(instances UP) / total (ENDPOINTS), whether the platform allows the
import (PERMITTED, as for syncers), whether they match the last registry
read (SYNCED), when they last did (LAST-SYNC: while Eureka cannot be read
the endpoints stay as they were, and this says how stale they are) and
the reason of Synced. -o wide adds the Service's type.

Then the Eureka writes Eurekube's gateway refused, or in audit mode let
through although its rules refuse them: its Events on the writers' pods
(reasons EurekaWriteRefused and EurekaWriteAudited), newest first, under
a line that counts the writes, each with when it was last seen
(LAST-SEEN), the pod, how many writes the Event stands for (COUNT: the
gateway records one Event per pod, reason and minute, and the API server
counts its repeats) and the gateway's message (which write, why). The
newest 20; -o wide lists all. The API server keeps Events for an hour by
default (its --event-ttl).

-o yaml and -o json print a List of the syncers and the imports, as
kubectl get esync,eimp -o yaml does (without the Events).`

// statusColumns are the table's columns; wide adds the rest.
var (
	statusColumns = []string{"NAMESPACE", "NAME", "APP", "MODE", "TRAFFIC", "READY", "INJECTED", "REGISTERED", "ELSEWHERE", "PERMITTED", "SYNCED", "AGE"}
	wideColumns   = []string{"CALLS-TO", "SKIPPED", "OTHER-SYNCER", "NO-DRAIN", "OUTDATED", "LAST-SYNC", "REASON"}
	importColumns = []string{"NAMESPACE", "NAME", "APP", "SERVICE", "ENDPOINTS", "PERMITTED", "SYNCED", "LAST-SYNC", "REASON", "AGE"}
	importWide    = []string{"TYPE"}
)

func runStatus(ctx context.Context, e *env, args []string) error {
	var kube kubeFlags
	var all bool
	var output string
	fs := e.flagSet("status", "[-n NAMESPACE | -A] [-o wide|yaml|json]", statusHelp)
	kube.add(fs, "only the syncers and imports of this namespace (default: every namespace)")
	fs.BoolVarP(&all, "all-namespaces", "A", false, "every namespace (the default unless -n is given)")
	fs.StringVarP(&output, "output", "o", "", "output format: wide, yaml or json (default: the table)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch output {
	case "", "wide", "yaml", "json":
	default:
		return usagef("-o %s: want wide, yaml or json", output)
	}
	if all && kube.namespace != "" {
		return usagef("-n and -A exclude each other")
	}
	cl, err := kube.connect()
	if err != nil {
		return err
	}
	var syncers v1alpha1.EurekaSyncerList
	if err := cl.List(ctx, &syncers, client.InNamespace(kube.namespace)); err != nil {
		return fmt.Errorf("list EurekaSyncers: %w", err)
	}
	imports, err := listImports(ctx, cl, kube.namespace)
	if err != nil {
		return err
	}
	if output == "yaml" || output == "json" {
		return printStatus(e.Out, syncers.Items, imports, output, time.Now())
	}
	// The refusals are shown where they can be read; a user who may not
	// list Events still gets the rest.
	refusals, evErr := listGatewayEvents(ctx, cl, kube.namespace)
	now := time.Now()
	if len(syncers.Items) == 0 && len(imports) == 0 {
		where := "any namespace"
		if kube.namespace != "" {
			where = "namespace " + kube.namespace
		}
		fmt.Fprintf(e.Err, "No EurekaSyncer or EurekaImport found in %s.\n", where)
	} else if err := printStatus(e.Out, syncers.Items, imports, output, now); err != nil {
		return err
	}
	if evErr != nil {
		fmt.Fprintf(e.Err, "The gateway's refusals are not shown: %v\n", evErr)
		return nil
	}
	if len(refusals) > 0 && (len(syncers.Items) > 0 || len(imports) > 0) {
		fmt.Fprintln(e.Out)
	}
	return printGatewayEvents(e.Out, refusals, output == "wide", now)
}

// listImports lists the imports of namespace (every namespace when
// empty); none where the cluster's Eurekube predates imports (no CRD).
func listImports(ctx context.Context, c client.Reader, namespace string) ([]v1alpha1.EurekaImport, error) {
	var list v1alpha1.EurekaImportList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list EurekaImports: %w", err)
	}
	return list.Items, nil
}

// printStatus prints the syncers, then the imports, in the format asked
// for.
func printStatus(w io.Writer, syncers []v1alpha1.EurekaSyncer, imports []v1alpha1.EurekaImport, output string, now time.Time) error {
	switch output {
	case "yaml", "json":
		return printObjects(w, syncers, imports, output)
	}
	wide := output == "wide"
	if len(syncers) > 0 {
		err := printTable(w, statusColumns, wideColumns, wide, len(syncers), func(i int) []string { return statusRow(&syncers[i], wide, now) })
		if err != nil {
			return err
		}
	}
	if len(imports) > 0 {
		if len(syncers) > 0 {
			fmt.Fprintln(w)
		}
		return printTable(w, importColumns, importWide, wide, len(imports), func(i int) []string { return importRow(&imports[i], wide, now) })
	}
	return nil
}

// printTable writes n rows under the columns (and with wide the wide
// ones) aligned, as kubectl does.
func printTable(w io.Writer, columns, wideColumns []string, wide bool, n int, row func(i int) []string) error {
	if wide {
		columns = append(columns[:len(columns):len(columns)], wideColumns...)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for i := range n {
		fmt.Fprintln(tw, strings.Join(row(i), "\t"))
	}
	return tw.Flush()
}

// printObjects prints the syncers and the imports as one List, the shape
// of kubectl get esync,eimp -o yaml.
func printObjects(w io.Writer, syncers []v1alpha1.EurekaSyncer, imports []v1alpha1.EurekaImport, output string) error {
	list := metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: []runtime.RawExtension{}}
	for i := range syncers {
		s := syncers[i].DeepCopy()
		s.APIVersion, s.Kind, s.ManagedFields = v1alpha1.GroupVersion.String(), "EurekaSyncer", nil
		list.Items = append(list.Items, runtime.RawExtension{Object: s})
	}
	for i := range imports {
		imp := imports[i].DeepCopy()
		imp.APIVersion, imp.Kind, imp.ManagedFields = v1alpha1.GroupVersion.String(), "EurekaImport", nil
		list.Items = append(list.Items, runtime.RawExtension{Object: imp})
	}
	var out []byte
	var err error
	if output == "yaml" {
		out, err = yaml.Marshal(list)
	} else {
		out, err = json.MarshalIndent(list, "", "    ")
		out = append(out, '\n')
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// statusRow is one syncer's line: its status fields as the manager wrote
// them.
func statusRow(s *v1alpha1.EurekaSyncer, wide bool, now time.Time) []string {
	st := s.Status
	synced, reason := "-", "-"
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); c != nil {
		synced, reason = string(c.Status), orDash(c.Reason)
	}
	injected := fmt.Sprintf("%d/%d", st.InjectedPods, st.SelectedPods)
	if s.EffectiveMode() == v1alpha1.ModeService {
		injected = "-" // no registrar in Service mode
	}
	row := []string{
		s.Namespace, s.Name, orDash(cmpOr(st.AppName, s.EffectiveAppName())),
		string(s.EffectiveMode()), string(s.EffectiveTraffic()),
		orDash(st.Ready), injected, strconv.Itoa(int(st.RegisteredInstances)), orDash(st.Elsewhere),
		permitted(st.Conditions), synced, age(s.CreationTimestamp.Time, now),
	}
	if !wide {
		return row
	}
	lastSync := "-"
	if st.LastSyncTime != nil {
		lastSync = age(st.LastSyncTime.Time, now) + " ago"
	}
	return append(row,
		orDash(string(st.TrafficTo)),
		strconv.Itoa(int(st.SkippedPods)), strconv.Itoa(int(st.PodsOwnedByOtherSyncers)),
		strconv.Itoa(int(st.PodsWithoutDrain)), strconv.Itoa(int(st.OutdatedRegistrarPods)),
		lastSync, reason,
	)
}

// importRow is one import's line: its status as the manager wrote it.
func importRow(imp *v1alpha1.EurekaImport, wide bool, now time.Time) []string {
	st := imp.Status
	synced, reason := "-", "-"
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); c != nil {
		synced, reason = string(c.Status), orDash(c.Reason)
	}
	lastSync := "-"
	if st.LastSyncTime != nil {
		lastSync = age(st.LastSyncTime.Time, now) + " ago"
	}
	row := []string{
		imp.Namespace, imp.Name, cmpOr(st.App, imp.EffectiveApp()), cmpOr(st.ServiceName, imp.EffectiveServiceName()),
		orDash(st.Endpoints), permitted(st.Conditions), synced, lastSync, reason, age(imp.CreationTimestamp.Time, now),
	}
	if wide {
		row = append(row, string(cmpOr(imp.Spec.Service.Type, v1alpha1.ImportClusterIP)))
	}
	return row
}

// permitted is the PERMITTED cell: the Permitted condition's status, and
// when it is False the refusal's reason, so the table itself says why.
func permitted(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionPermitted)
	switch {
	case c == nil:
		return "-"
	case c.Status == metav1.ConditionFalse:
		return fmt.Sprintf("False (%s)", orDash(c.Reason))
	}
	return string(c.Status)
}

func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orDash(s string) string { return cmpOr(s, "-") }

func cmpOr[S ~string](a, b S) S {
	if a != "" {
		return a
	}
	return b
}
