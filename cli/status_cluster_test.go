package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/tests/harness"
)

// The gateway writes its Events through events.k8s.io/v1; status reads
// them through core/v1, in the namespaces it shows, and only the
// gateway's.
func TestStatus_ListsTheGatewaysRefusalsOfTheNamespacesItShows(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	createNamespace(ctx, t, cp, "status-evil", false)
	createNamespace(ctx, t, cp, "status-legacy", false)
	now := time.Now()
	event := func(ns, pod, reason, controller string, count int32) *eventsv1.Event {
		e := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", pod, now.UnixNano()+int64(len(reason)))},
			EventTime:           metav1.NewMicroTime(now.Add(-time.Duration(count) * time.Minute)),
			ReportingController: controller,
			ReportingInstance:   controller + "-7d9c8",
			Action:              gateway.OpRenew,
			Reason:              reason,
			Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod, UID: "0a1b2c3d"},
			Note:                "Eureka renew of app ORDERS instance " + pod + " refused by Eurekube's gateway (NotOwnInstance): not its own",
			Type:                corev1.EventTypeWarning,
		}
		if count > 1 {
			e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(now.Add(-10 * time.Second))}
		}
		if err := cp.Client.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	event("status-evil", "probe-1", gateway.EventReasonRefused, gatewayReporter, 7)
	event("status-evil", "probe-2", gateway.EventReasonRefused, "someone-else", 1)
	event("status-legacy", "batch-0", gateway.EventReasonAudited, gatewayReporter, 1)

	var stdout string
	harness.Eventually(t, 30*time.Second, "status -n status-evil lists the refusal", func() error {
		code, out, stderr := runOn(t, cp, "status", "-n", "status-evil")
		stdout = out
		if code != ExitOK || !strings.Contains(stderr, "No EurekaSyncer or EurekaImport found in namespace status-evil") {
			return fmt.Errorf("exit %d\n%s%s", code, out, stderr)
		}
		if !strings.Contains(out, "7 refused (EurekaWriteRefused), 0 audited") {
			return fmt.Errorf("no count of 7 refusals:\n%s", out)
		}
		return nil
	})
	row := strings.Fields(lineWith(stdout, "probe-1"))
	if len(row) < 6 || row[0] != "10s" || row[1] != "status-evil" || row[3] != gateway.EventReasonRefused || row[4] != "7" || !strings.Contains(lineWith(stdout, "probe-1"), "(NotOwnInstance): not its own") {
		t.Errorf("the refusal's row: %q\n%s", row, stdout)
	}
	if strings.Contains(stdout, "probe-2") || strings.Contains(stdout, "batch-0") {
		t.Errorf("status -n status-evil lists another's Event or another namespace's:\n%s", stdout)
	}

	code, out, stderr := runOn(t, cp, "status", "-A")
	if code != ExitOK || !strings.Contains(out, "probe-1") || !strings.Contains(out, "batch-0") || !strings.Contains(out, "7 refused (EurekaWriteRefused), 1 audited (EurekaWriteAudited") {
		t.Errorf("status -A: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Index(out, "probe-1") > strings.Index(out, "batch-0") {
		t.Errorf("status -A: not newest first:\n%s", out)
	}
}

// lineWith is the first line of out that contains s.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
