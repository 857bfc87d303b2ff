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
the registrar (INJECTED), this cluster's instances in Eureka (REGISTERED)
and whether Eureka agrees with Kubernetes (SYNCED). Every figure is the
syncer's status as the manager measured it at its last resync; nothing is
recomputed here. -o wide adds where calls go (CALLS-TO), the pods skipped,
owned by another syncer, without a drain or on an outdated registrar, the
last sync and the reason of Synced.`

// statusColumns are the table's columns; wide adds the rest.
var (
	statusColumns = []string{"NAMESPACE", "NAME", "APP", "MODE", "TRAFFIC", "READY", "INJECTED", "REGISTERED", "ELSEWHERE", "SYNCED", "AGE"}
	wideColumns   = []string{"CALLS-TO", "SKIPPED", "OTHER-SYNCER", "NO-DRAIN", "OUTDATED", "LAST-SYNC", "REASON"}
)

func runStatus(ctx context.Context, e *env, args []string) error {
	var kube kubeFlags
	var all bool
	var output string
	fs := e.flagSet("status", "[-n NAMESPACE | -A] [-o wide|yaml|json]", statusHelp)
	kube.add(fs, "only the syncers of this namespace (default: every namespace)")
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
	var list v1alpha1.EurekaSyncerList
	if err := cl.List(ctx, &list, client.InNamespace(kube.namespace)); err != nil {
		return fmt.Errorf("list EurekaSyncers: %w", err)
	}
	if len(list.Items) == 0 && output != "yaml" && output != "json" {
		where := "any namespace"
		if kube.namespace != "" {
			where = "namespace " + kube.namespace
		}
		fmt.Fprintf(e.Err, "No EurekaSyncer found in %s.\n", where)
		return nil
	}
	return printStatus(e.Out, &list, output, time.Now())
}

// printStatus prints the syncers in the format asked for.
func printStatus(w io.Writer, list *v1alpha1.EurekaSyncerList, output string, now time.Time) error {
	switch output {
	case "yaml", "json":
		list.APIVersion, list.Kind = v1alpha1.GroupVersion.String(), "EurekaSyncerList"
		for i := range list.Items {
			list.Items[i].APIVersion, list.Items[i].Kind = v1alpha1.GroupVersion.String(), "EurekaSyncer"
			list.Items[i].ManagedFields = nil
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
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	columns := statusColumns
	if output == "wide" {
		columns = append(columns[:len(columns):len(columns)], wideColumns...)
	}
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for i := range list.Items {
		fmt.Fprintln(tw, strings.Join(statusRow(&list.Items[i], output == "wide", now), "\t"))
	}
	return tw.Flush()
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
		synced, age(s.CreationTimestamp.Time, now),
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

func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orDash(s string) string { return cmpOr(s, "-") }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
