package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// A count of writes says how many; what they changed says why. These read,
// before and after a restart's pass, every syncer's status and every
// Event, and name what the pass changed: the status fields (a condition's
// by its type and part) and the Events' reasons.

// restartState is every syncer's status and the UIDs of every Event.
type restartState struct {
	statuses map[types.NamespacedName]v1alpha1.EurekaSyncerStatus
	events   map[types.UID]bool
}

// restartChanges is what a pass changed: syncers per status field, Events
// per type and reason, and a note of each reason's first Event.
type restartChanges struct {
	fields, events map[string]int
	notes          map[string]string
}

func readRestartState(ctx context.Context, k8s client.Client) (restartState, error) {
	st := restartState{statuses: map[types.NamespacedName]v1alpha1.EurekaSyncerStatus{}, events: map[types.UID]bool{}}
	var syncers v1alpha1.EurekaSyncerList
	if err := k8s.List(ctx, &syncers); err != nil {
		return st, fmt.Errorf("list syncers: %w", err)
	}
	for _, s := range syncers.Items {
		st.statuses[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s.Status
	}
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events); err != nil {
		return st, fmt.Errorf("list events: %w", err)
	}
	for _, e := range events.Items {
		st.events[e.UID] = true
	}
	return st, nil
}

// restartChangesSince reads the state again and says what changed since
// before.
func restartChangesSince(ctx context.Context, k8s client.Client, before restartState) (restartChanges, error) {
	ch := restartChanges{fields: map[string]int{}, events: map[string]int{}, notes: map[string]string{}}
	var syncers v1alpha1.EurekaSyncerList
	if err := k8s.List(ctx, &syncers); err != nil {
		return ch, fmt.Errorf("list syncers: %w", err)
	}
	for _, s := range syncers.Items {
		was, ok := before.statuses[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}]
		if !ok {
			ch.fields["(a new syncer)"]++
			continue
		}
		for _, f := range statusFieldChanges(was, s.Status) {
			ch.fields[f]++
		}
	}
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events); err != nil {
		return ch, fmt.Errorf("list events: %w", err)
	}
	for _, e := range events.Items {
		if before.events[e.UID] {
			continue
		}
		key := e.Type + " " + e.Reason
		ch.events[key]++
		if _, ok := ch.notes[key]; !ok {
			ch.notes[key] = e.Regarding.Kind + " " + e.Regarding.Namespace + "/" + e.Regarding.Name + ": " + e.Note
		}
	}
	return ch, nil
}

// statusFieldChanges names the fields of a status that differ: top-level
// fields by their JSON name, conditions as conditions[Type].part.
func statusFieldChanges(was, now v1alpha1.EurekaSyncerStatus) []string {
	a, b := jsonFields(was), jsonFields(now)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		if k == "conditions" {
			continue
		}
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	byType := map[string][2]map[string]any{}
	for i, conds := range [][]any{asList(a["conditions"]), asList(b["conditions"])} {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			t, _ := m["type"].(string)
			pair := byType[t]
			pair[i] = m
			byType[t] = pair
		}
	}
	for _, t := range slices.Sorted(maps.Keys(byType)) {
		pair := byType[t]
		switch {
		case pair[0] == nil:
			out = append(out, "conditions["+t+"] added")
		case pair[1] == nil:
			out = append(out, "conditions["+t+"] removed")
		default:
			for _, k := range slices.Sorted(maps.Keys(union(pair[0], pair[1]))) {
				if !reflect.DeepEqual(pair[0][k], pair[1][k]) {
					out = append(out, "conditions["+t+"]."+k)
				}
			}
		}
	}
	return out
}

func jsonFields(v any) map[string]any {
	data, _ := json.Marshal(v)
	m := map[string]any{}
	_ = json.Unmarshal(data, &m)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func union(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// String names the fields and reasons, most first: "syncers whose status
// changed, by field: 600 lastSyncTime; new Events by type and reason: 3
// Warning SyncFailed (such as EurekaSyncer ns/name: note)".
func (c restartChanges) String() string {
	if len(c.fields) == 0 && len(c.events) == 0 {
		return "no status field and no Event changed"
	}
	var parts []string
	if len(c.fields) > 0 {
		parts = append(parts, "syncers whose status changed, by field: "+countsMostFirst(c.fields, nil))
	}
	if len(c.events) > 0 {
		parts = append(parts, "new Events by type and reason: "+countsMostFirst(c.events, c.notes))
	}
	return strings.Join(parts, "; ")
}

func countsMostFirst(counts map[string]int, notes map[string]string) string {
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d %s", counts[k], k)
		if n := notes[k]; n != "" {
			out[i] += " (such as " + truncateNote(n, 200) + ")"
		}
	}
	return strings.Join(out, ", ")
}

func truncateNote(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
