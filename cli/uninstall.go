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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

const uninstallHelp = `
Delete every EurekaSyncer in every namespace and wait until each is gone,
before Eurekube itself is uninstalled (the Helm chart runs it as a
pre-delete hook). The manager detaches each deleted syncer (cancels its
instances in Eureka, stops injecting, removes its finalizer), so it must
be running until this command ends. On --timeout the syncers still
present are listed with their conditions and the exit code is 1.`

// uninstallPoll is how often uninstall looks at the syncers left.
var uninstallPoll = time.Second

func runUninstall(ctx context.Context, e *env, args []string) error {
	var kube kubeFlags
	var timeout time.Duration
	fs := e.flagSet("uninstall", "[--timeout=5m]", uninstallHelp)
	kube.add(fs, "")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the manager to detach every syncer")
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

// uninstall deletes every syncer and waits until none is left.
func uninstall(ctx context.Context, c client.Client, out, errOut io.Writer, timeout time.Duration) error {
	left, err := listSyncers(ctx, c)
	if err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			fmt.Fprintln(out, "No EurekaSyncer CRD: nothing to delete.")
			return nil
		}
		return err
	}
	if len(left) == 0 {
		fmt.Fprintln(out, "No EurekaSyncer left.")
		return nil
	}
	for i := range left {
		s := &left[i]
		err := c.Delete(ctx, s, client.PropagationPolicy("Background"))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete EurekaSyncer %s/%s: %w", s.Namespace, s.Name, err)
		}
		fmt.Fprintf(out, "deleted EurekaSyncer %s/%s\n", s.Namespace, s.Name)
	}
	fmt.Fprintf(out, "waiting for the manager to detach %d EurekaSyncer(s)\n", len(left))

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
			reportLeft(errOut, left, timeout)
			return errReported
		case <-tick.C:
		}
		now, err := listSyncers(wctx, c)
		if err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || meta.IsNoMatchError(err) {
				return err
			}
			// A read cut short by the deadline (client-go's rate limiter
			// refuses to wait past it, which is no DeadlineExceeded) or a
			// passing failure: read again until the deadline, then report
			// what was last seen.
			continue
		}
		for _, s := range left {
			if !slices.ContainsFunc(now, func(n v1alpha1.EurekaSyncer) bool { return n.UID == s.UID }) {
				fmt.Fprintf(out, "detached EurekaSyncer %s/%s (%d left)\n", s.Namespace, s.Name, len(now))
			}
		}
		left = now
		if len(left) == 0 {
			fmt.Fprintln(out, "Every EurekaSyncer is gone: Eurekube can be uninstalled.")
			return nil
		}
	}
}

func listSyncers(ctx context.Context, c client.Reader) ([]v1alpha1.EurekaSyncer, error) {
	var list v1alpha1.EurekaSyncerList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list EurekaSyncers: %w", err)
	}
	return list.Items, nil
}

// reportLeft names the syncers still present, their finalizers and
// conditions, and what keeps them.
func reportLeft(w io.Writer, left []v1alpha1.EurekaSyncer, timeout time.Duration) {
	fmt.Fprintf(w, "timed out after %s: %d EurekaSyncer(s) still present:\n", timeout, len(left))
	for _, s := range left {
		fmt.Fprintf(w, "  %s/%s  finalizers: %s\n", s.Namespace, s.Name, orDash(strings.Join(s.Finalizers, ", ")))
		for _, c := range s.Status.Conditions {
			fmt.Fprintf(w, "    %s=%s %s: %s\n", c.Type, c.Status, c.Reason, eureka.Redact(c.Message)) // an older manager's may quote a password
		}
	}
	fmt.Fprintf(w, "The manager removes each syncer's finalizer (%s) once it has detached it: it must be running (kubectl -n eurekube-system get pods). Uninstall Eurekube only after every syncer is gone.\n", v1alpha1.Finalizer)
}
