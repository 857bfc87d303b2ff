package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/gateway"
)

// gatewayColumns are the columns of the gateway's refusals.
var gatewayColumns = []string{"LAST-SEEN", "NAMESPACE", "POD", "REASON", "COUNT", "MESSAGE"}

// maxGatewayRows bounds the refusals the table lists (-o wide lists all).
const maxGatewayRows = 20

// gatewayReasons are the reasons of the gateway's Events on pods.
var gatewayReasons = []string{gateway.EventReasonRefused, gateway.EventReasonAudited}

// listGatewayEvents lists the gateway's Events on pods whose writes it
// refused, or in audit mode would refuse, in namespace (every namespace
// when empty): core/v1, which every reader of Events may read; the
// gateway writes them through events.k8s.io/v1, the same objects.
func listGatewayEvents(ctx context.Context, c client.Reader, namespace string) ([]corev1.Event, error) {
	var out []corev1.Event
	for _, reason := range gatewayReasons {
		var list corev1.EventList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{"reason": reason}); err != nil {
			return nil, fmt.Errorf("list the Events of reason %s: %w", reason, err)
		}
		for _, e := range list.Items {
			if e.ReportingController == gatewayReporter || e.Source.Component == gatewayReporter {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// eventLastSeen is when an Event was last seen, whichever API wrote it.
func eventLastSeen(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// eventCount is how many times an Event was seen.
func eventCount(e *corev1.Event) int32 {
	switch {
	case e.Series != nil && e.Series.Count > 0:
		return e.Series.Count
	case e.Count > 0:
		return e.Count
	}
	return 1
}

// printGatewayEvents prints the gateway's refusals, newest first, under a
// line that counts them; nothing when there are none. Without wide, the
// newest maxGatewayRows only, and how to list the rest.
func printGatewayEvents(w io.Writer, events []corev1.Event, wide bool, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		if c := eventLastSeen(&b).Compare(eventLastSeen(&a)); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	writes := map[string]int32{}
	for i := range events {
		writes[events[i].Reason] += eventCount(&events[i])
	}
	fmt.Fprintf(w, "The gateway's refusals of pods' Eureka writes: %d refused (%s), %d audited (%s: let through in audit mode, enforce would refuse them), in %d Event(s), newest first\n",
		writes[gateway.EventReasonRefused], gateway.EventReasonRefused, writes[gateway.EventReasonAudited], gateway.EventReasonAudited, len(events))
	shown := events
	if !wide && len(shown) > maxGatewayRows {
		shown = shown[:maxGatewayRows]
	}
	err := printTable(w, gatewayColumns, nil, false, len(shown), func(i int) []string {
		e := &shown[i]
		return []string{
			age(eventLastSeen(e), now), e.Namespace, orDash(e.InvolvedObject.Name), e.Reason,
			strconv.Itoa(int(eventCount(e))), oneLine(e.Message),
		}
	})
	if err != nil {
		return err
	}
	if more := len(events) - len(shown); more > 0 {
		fmt.Fprintf(w, "... and %d more (-o wide lists all; kubectl get events -A --field-selector reason=%s)\n", more, gateway.EventReasonRefused)
	}
	return nil
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
