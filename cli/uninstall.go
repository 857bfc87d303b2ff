package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

const uninstallHelp = `
Delete every EurekaSyncer and every EurekaImport in every namespace and
wait until each is gone, before Eurekube itself is uninstalled (the Helm
chart runs it as a pre-delete hook). The manager detaches each deleted
syncer (cancels its instances in Eureka, stops injecting) and removes each
deleted import's Service, Endpoints and EndpointSlices (a Service handed
over to Kubernetes stays), then removes their finalizers, so it must be
running until this command ends: an import or syncer left behind would
hold its namespace, and the CRD, on a finalizer nobody removes. On
--timeout the ones still present are listed with their conditions and the
exit code is 1.`

// uninstallPoll is how often uninstall looks at what is left.
var uninstallPoll = time.Second

func runUninstall(ctx context.Context, e *env, args []string) error {
	var kube kubeFlags
	var timeout time.Duration
	fs := e.flagSet("uninstall", "[--timeout=5m]", uninstallHelp)
	kube.add(fs, "")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the manager to let every syncer and import go")
	if err := parse(fs, args); err != nil {
		return err
	}
	if timeout <= 0 {
		return usagef("--timeout %s: want a positive duration such as 5m", timeout)
	}
	cl, err := kube.connect()
	if err != nil {
		return err
	}
	return uninstall(ctx, cl, e.Out, e.Err, timeout)
}

// departing is a kind uninstall deletes, and waits for: the manager lets
// each go once it has undone what it did for it.
type departing struct {
	kind string
	// undo and undone say what the manager does before one is gone;
	// finalizer is the manager's on it.
	undo, undone, finalizer string
	newList                 func() client.ObjectList
}

// departed is one object of a departing kind, as uninstall reports it.
type departed struct {
	client.Object
	conditions []metav1.Condition
}

var departingKinds = []departing{
	{kind: "EurekaSyncer", undo: "detach", undone: "detached", finalizer: v1alpha1.Finalizer, newList: func() client.ObjectList { return &v1alpha1.EurekaSyncerList{} }},
	{kind: "EurekaImport", undo: "remove", undone: "removed", finalizer: v1alpha1.ImportFinalizer, newList: func() client.ObjectList { return &v1alpha1.EurekaImportList{} }},
}

// list reads every object of the kind, in every namespace.
func (k departing) list(ctx context.Context, c client.Reader) ([]departed, error) {
	list := k.newList()
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]departed, 0, len(items))
	for _, item := range items {
		d := departed{Object: item.(client.Object)}
		switch o := item.(type) {
		case *v1alpha1.EurekaSyncer:
			d.conditions = o.Status.Conditions
		case *v1alpha1.EurekaImport:
			d.conditions = o.Status.Conditions
		}
		out = append(out, d)
	}
	return out, nil
}

// uninstall deletes every syncer and import and waits until none is left.
func uninstall(ctx context.Context, c client.Client, out, errOut io.Writer, timeout time.Duration) error {
	var kinds []departing
	left := map[string][]departed{}
	for _, k := range departingKinds {
		objs, err := k.list(ctx, c)
		if err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				fmt.Fprintf(out, "No %s CRD: no %s to delete.\n", k.kind, k.kind)
				continue
			}
			return fmt.Errorf("list %ss: %w", k.kind, err)
		}
		kinds = append(kinds, k)
		left[k.kind] = objs
	}
	if len(kinds) == 0 {
		return nil
	}
	if total(left) == 0 {
		fmt.Fprintf(out, "No %s left.\n", kindNames(kinds, " or "))
		return nil
	}
	var waiting []string
	for _, k := range kinds {
		for _, o := range left[k.kind] {
			err := c.Delete(ctx, o.Object, client.PropagationPolicy("Background"))
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s/%s: %w", k.kind, o.GetNamespace(), o.GetName(), err)
			}
			fmt.Fprintf(out, "deleted %s %s/%s\n", k.kind, o.GetNamespace(), o.GetName())
		}
		if n := len(left[k.kind]); n > 0 {
			waiting = append(waiting, fmt.Sprintf("%s %d %s(s)", k.undo, n, k.kind))
		}
	}
	fmt.Fprintf(out, "waiting for the manager to %s\n", strings.Join(waiting, " and "))

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(uninstallPoll)
	defer tick.Stop()
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			reportLeft(errOut, kinds, left, timeout)
			return errReported
		case <-tick.C:
		}
		for _, k := range kinds {
			if len(left[k.kind]) == 0 {
				continue
			}
			now, err := k.list(wctx, c)
			if err != nil {
				if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || meta.IsNoMatchError(err) {
					return fmt.Errorf("list %ss: %w", k.kind, err)
				}
				// A read cut short by the deadline (client-go's rate
				// limiter refuses to wait past it, which is no
				// DeadlineExceeded) or a passing failure: read again
				// until the deadline, then report what was last seen.
				continue
			}
			for _, o := range left[k.kind] {
				if !slices.ContainsFunc(now, func(n departed) bool { return n.GetUID() == o.GetUID() }) {
					fmt.Fprintf(out, "%s %s %s/%s (%d left)\n", k.undone, k.kind, o.GetNamespace(), o.GetName(), len(now))
				}
			}
			left[k.kind] = now
		}
		if total(left) == 0 {
			fmt.Fprintf(out, "Every %s is gone: Eurekube can be uninstalled.\n", kindNames(kinds, " and "))
			return nil
		}
	}
}

func total(left map[string][]departed) int {
	n := 0
	for _, objs := range left {
		n += len(objs)
	}
	return n
}

// kindNames joins the kinds' names with sep.
func kindNames(kinds []departing, sep string) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.kind
	}
	return strings.Join(names, sep)
}

// reportLeft names the syncers and imports still present, their
// finalizers and conditions, and what keeps them.
func reportLeft(w io.Writer, kinds []departing, left map[string][]departed, timeout time.Duration) {
	for _, k := range kinds {
		objs := left[k.kind]
		if len(objs) == 0 {
			continue
		}
		fmt.Fprintf(w, "timed out after %s: %d %s(s) still present:\n", timeout, len(objs), k.kind)
		for _, o := range objs {
			fmt.Fprintf(w, "  %s/%s  finalizers: %s\n", o.GetNamespace(), o.GetName(), orDash(strings.Join(o.GetFinalizers(), ", ")))
			for _, c := range o.conditions {
				fmt.Fprintf(w, "    %s=%s %s: %s\n", c.Type, c.Status, c.Reason, eureka.Redact(c.Message)) // an older manager's may quote a password
			}
		}
		fmt.Fprintf(w, "The manager removes each %s's finalizer (%s) once it has %s it: it must be running (kubectl -n eurekube-system get pods).\n", k.kind, k.finalizer, k.undone)
	}
	fmt.Fprintln(w, "Uninstall Eurekube only after every syncer and import is gone.")
}
