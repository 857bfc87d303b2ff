package controller

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/webhook"
)

// What the registrars of a syncer's pods were given.
//
// A registrar keeps the settings it was injected with: its environment
// holds them as literal values, and a pod's environment never changes. A
// syncer deleted and created again with other URLs, or whose spec changed,
// leaves its running pods registering as before; specDrift names what
// differs from what the webhook would give the pod now.

// comparedEnv are the settings compared between what a pod's registrar was
// given and what the spec gives now, in the order of sidecar/env.go: where
// it registers, as what, and when it turns UP. Metadata, VIP addresses and
// the lease are left out: a pod running with older ones still registers
// where and as what the spec says.
var comparedEnv = []string{
	sidecar.EnvAppName, sidecar.EnvPort, sidecar.EnvEurekaURLs,
	sidecar.EnvHealthType, sidecar.EnvHealthScheme, sidecar.EnvHealthPath, sidecar.EnvHealthPort,
	sidecar.EnvHealthPeriod, sidecar.EnvHealthTimeout, sidecar.EnvHealthFailureThreshold, sidecar.EnvHealthSuccessThreshold,
}

// downwardPlaceholders stand in for the variables the kubelet fills from
// the downward API, which ParseEnv requires and which are not compared.
var downwardPlaceholders = []sidecar.EnvVar{
	{Name: sidecar.EnvPodName, Value: "pod"},
	{Name: sidecar.EnvPodNamespace, Value: "namespace"},
	{Name: sidecar.EnvPodUID, Value: "uid"},
	{Name: sidecar.EnvPodIP, Value: "192.0.2.1"},
}

// specDrift names the compared settings in which the registrar of pod, which
// syncer s injected, differs from what the webhook gives the pod now under
// s and the manager's defaults: "NAME: given → now", joined by ", ". ""
// when they agree, or when either side cannot be known (a registrar whose
// environment cannot be read, annotations or a spec the webhook would
// refuse now): nothing is claimed then.
func specDrift(pod *corev1.Pod, s *v1alpha1.EurekaSyncer, defaults webhook.Defaults) string {
	given, ok := injectedSettings(pod)
	if !ok {
		return ""
	}
	overrides, err := webhook.ParseAnnotations(pod.Annotations)
	if err != nil {
		return ""
	}
	now, err := webhook.Settings(pod, webhook.Config{Syncer: s, Overrides: overrides, Defaults: defaults})
	if err != nil {
		return ""
	}
	return specChanges(&given, &now)
}

// driftMemo keeps what specDrift found for each syncer's pods from one
// count to the next: a pod whose resourceVersion did not change, under the
// same spec (the syncer's UID and generation) and the same manager
// defaults, differs as it did. Only new and changed pods are parsed: a
// resync of unchanged pods parses none. A count keeps only its own pods, so
// those gone are forgotten with it.
type driftMemo struct {
	mu       sync.Mutex
	bySyncer map[types.NamespacedName]*podDrifts
}

// podDrifts are the results of one count of one syncer's pods.
type podDrifts struct {
	syncer     types.UID
	generation int64
	last       map[types.UID]podDrift // the previous count's
	pods       map[types.UID]podDrift
}

type podDrift struct{ resourceVersion, changes string }

// take returns the results of the last count of s for this count to
// reuse; with a nil memo, none.
func (m *driftMemo) take(s *v1alpha1.EurekaSyncer) *podDrifts {
	d := &podDrifts{syncer: s.UID, generation: s.Generation, pods: map[types.UID]podDrift{}}
	if m == nil {
		return d
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev := m.bySyncer[client.ObjectKeyFromObject(s)]; prev != nil && prev.syncer == s.UID && prev.generation == s.Generation {
		d.last = prev.pods
	}
	return d
}

// keep stores the results of this count of s for the next.
func (m *driftMemo) keep(s *v1alpha1.EurekaSyncer, d *podDrifts) {
	if m == nil {
		return
	}
	d.last = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bySyncer == nil {
		m.bySyncer = map[types.NamespacedName]*podDrifts{}
	}
	m.bySyncer[client.ObjectKeyFromObject(s)] = d
}

func (m *driftMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.bySyncer, key)
}

// of is specDrift of pod, from the last count when the pod did not change.
func (d *podDrifts) of(pod *corev1.Pod, s *v1alpha1.EurekaSyncer, defaults webhook.Defaults) string {
	if prev, ok := d.last[pod.UID]; ok && pod.ResourceVersion != "" && prev.resourceVersion == pod.ResourceVersion {
		d.pods[pod.UID] = prev
		return prev.changes
	}
	changes := specDrift(pod, s, defaults)
	d.pods[pod.UID] = podDrift{resourceVersion: pod.ResourceVersion, changes: changes}
	return changes
}

// injectedSettings are the settings the pod's registrar was given, read
// from the literal values of its container's environment as the registrar
// reads them; false when they cannot be read.
func injectedSettings(pod *corev1.Pod) (sidecar.Config, bool) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == v1alpha1.RegistrarContainerName {
			c = &pod.Spec.Containers[i]
			break
		}
	}
	if c == nil {
		return sidecar.Config{}, false
	}
	env := make([]sidecar.EnvVar, 0, len(downwardPlaceholders)+len(c.Env))
	env = append(env, downwardPlaceholders...) // the literal values, after them, win
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, sidecar.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	cfg, err := sidecar.ParseEnv(sidecar.LookupIn(env))
	return cfg, err == nil
}

// specChanges compares the settings of comparedEnv, rendered as the
// registrar's environment renders them.
func specChanges(given, now *sidecar.Config) string {
	was, is := comparedSettings(given), comparedSettings(now)
	var changes []string
	for _, name := range comparedEnv {
		a, _ := was(name)
		b, _ := is(name)
		if a != b {
			changes = append(changes, fmt.Sprintf("%s: %s → %s", name, orNone(a), orNone(b)))
		}
	}
	return strings.Join(changes, ", ")
}

// comparedSettings looks up the compared settings of c in its rendering
// as the registrar's environment.
func comparedSettings(c *sidecar.Config) func(string) (string, bool) {
	only := sidecar.Config{AppName: c.AppName, Port: c.Port, EurekaURLs: c.EurekaURLs, Health: c.Health}
	return sidecar.LookupIn(only.Env())
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// specDriftMessage says which pods were injected from an older spec and
// what differs, one group per difference, sorted.
func specDriftMessage(groups map[string][]string) string {
	changes := make([]string, 0, len(groups))
	for c := range groups {
		changes = append(changes, c)
	}
	sort.Strings(changes)
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf("%d pod(s) injected from an older spec (%s): %s", len(groups[c]), c, names(groups[c])))
	}
	return strings.Join(parts, "; ")
}
