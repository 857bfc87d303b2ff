package controller

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/webhook"
)

// What the registrars of a syncer's pods were given and how they fare.
//
// A registrar keeps the settings it was injected with: its environment
// holds them as literal values, and a pod's environment never changes. A
// syncer deleted and created again with other URLs, or whose spec changed,
// leaves its running pods registering as before; specDrift names what
// differs from what the webhook would give the pod now.
//
// A registrar that exits (a bad value exits with code 2 and one line naming
// it) or cannot start leaves its pod out of Eureka; registrarFailureOf says
// why, in the registrar's own last words (its container's
// terminationMessagePolicy is FallbackToLogsOnError, so the kubelet keeps
// its last log lines in the termination message).

// Reasons of the RegistrarCurrent and RegistrarHealthy conditions.
const (
	reasonRegistrarCurrent  = "AllCurrent"
	reasonRegistrarOutdated = "OutdatedRegistrar"
	reasonSpecOutdated      = "OutdatedSpec"
	reasonRegistrarsRunning = "RegistrarsRunning"
	// reasonRegistrarFailing: RegistrarHealthy False, Synced False when
	// instances are missing, and the Warning Event.
	reasonRegistrarFailing = "RegistrarFailing"
)

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

// specDrift names the compared settings in which the registrar of pod, which
// syncer s injected, differs from what the webhook gives the pod now under
// s and the manager's defaults: "NAME: given → now", joined by ", ". ""
// when they agree, or when either side cannot be known (a registrar whose
// environment cannot be read, annotations or a spec the webhook would
// refuse now): nothing is claimed then.
func specDrift(pod *corev1.Pod, s *v1alpha1.EurekaSyncer, defaults webhook.Defaults) string {
	given, ok := webhook.InjectedSettings(pod)
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

// registrarFailure is a registrar that exits or cannot start.
type registrarFailure struct {
	pod   string
	words string // what it last said, or why it cannot start
}

// crashLoopWindow: a registrar running again after a failure still counts
// as failing for this long after its restart, as the kubelet only resets a
// container's restart backoff once it has run for 10 minutes. A registrar
// in a crash loop runs for moments between its waits: it is reported
// failing throughout, not flapping at each restart.
const crashLoopWindow = 10 * time.Minute

// maxLastWords bounds what is quoted of one registrar's last words.
const maxLastWords = 300

// maxFailingPods is how many failing pods a message names.
const maxFailingPods = 3

// cannotStart are the reasons a container waits with that mean it will not
// start until something is fixed (its image, a Secret, its command).
var cannotStart = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// registrarFailureOf says whether the pod's registrar is failing, and why:
// it has exited with an error and not restarted (or not for long: see
// crashLoopWindow), waits in CrashLoopBackOff, or cannot start.
func registrarFailureOf(pod *corev1.Pod, now time.Time) (string, bool) {
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if cs.Name != v1alpha1.RegistrarContainerName {
			continue
		}
		last := cs.LastTerminationState.Terminated
		switch st := cs.State; {
		case st.Terminated != nil && st.Terminated.ExitCode != 0:
			return lastWords(st.Terminated), true
		case st.Waiting != nil && cannotStart[st.Waiting.Reason]:
			return truncate(cmp.Or(firstLine(eureka.Redact(st.Waiting.Message)), st.Waiting.Reason), maxLastWords), true
		case st.Waiting != nil && last != nil && last.ExitCode != 0: // CrashLoopBackOff, or about to restart
			return lastWords(last), true
		case st.Running != nil && last != nil && last.ExitCode != 0 && now.Sub(st.Running.StartedAt.Time) < crashLoopWindow:
			return lastWords(last), true
		}
		return "", false
	}
	return "", false
}

// lastWords is the last line the registrar wrote before exiting (its
// termination message), led by why it was stopped when that was not its
// own error exit (OOMKilled, say), or its exit code when it wrote nothing.
func lastWords(t *corev1.ContainerStateTerminated) string {
	line := lastLine(eureka.Redact(t.Message)) // an older registrar quoted its URLs whole
	switch {
	case t.Reason != "" && t.Reason != "Error" && line != "":
		line = fmt.Sprintf("%s (exit code %d): %s", t.Reason, t.ExitCode, line)
	case t.Reason != "" && t.Reason != "Error":
		line = fmt.Sprintf("%s (exit code %d)", t.Reason, t.ExitCode)
	case line == "":
		line = fmt.Sprintf("exited with code %d", t.ExitCode)
	}
	return truncate(line, maxLastWords)
}

// lastLine is the last non-blank line of s, trimmed.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// failingMessage names up to maxFailingPods failing pods (as
// namespace/name) after what their registrars said, pods that said the same
// together, different words first: `5 pod(s): registrar: bad configuration:
// … (shop/orders-1, shop/orders-2 and 2 more); OOMKilled (exit code 137)
// (shop/orders-3)`.
func failingMessage(namespace string, failing []registrarFailure) string {
	var order []string
	pods := map[string][]string{}
	for _, f := range failing {
		if _, seen := pods[f.words]; !seen {
			order = append(order, f.words)
		}
		pods[f.words] = append(pods[f.words], namespace+"/"+f.pod)
	}
	shown := order[:min(len(order), maxFailingPods)]
	named := make([]int, len(shown)) // a name for each group in turn
	for left := maxFailingPods; left > 0; {
		before := left
		for i, words := range shown {
			if left > 0 && named[i] < len(pods[words]) {
				named[i]++
				left--
			}
		}
		if left == before {
			break
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d pod(s): ", len(failing))
	told := 0
	for i, words := range shown {
		group := pods[words]
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s", words, strings.Join(group[:named[i]], ", "))
		if more := len(group) - named[i]; more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString(")")
		told += len(group)
	}
	if rest := len(failing) - told; rest > 0 {
		fmt.Fprintf(&b, "; and %d more pod(s)", rest)
	}
	return b.String()
}

// registrarCurrent is False when pods this syncer injected run an older
// registrar than the webhook injects now, or were given other settings than
// the spec gives now (specDrift): they keep working with what they were
// given, and a rollout gives them the current registrar and settings. One
// condition for both, as the fix is the same; the reason is
// OutdatedRegistrar when any pod runs an older image, else OutdatedSpec.
func registrarCurrent(s *v1alpha1.EurekaSyncer, obs *observed) metav1.Condition {
	p := &obs.pods
	if len(p.outdated) == 0 {
		return metav1.Condition{Type: v1alpha1.ConditionRegistrarCurrent, Status: metav1.ConditionTrue, Reason: reasonRegistrarCurrent,
			Message: "every injected pod runs the registrar image the webhook injects now, with the settings the spec gives now"}
	}
	reason := reasonSpecOutdated
	var parts []string
	if n := len(p.outdatedImage); n > 0 {
		reason = reasonRegistrarOutdated
		parts = append(parts, fmt.Sprintf("%d injected pod(s) run an older registrar image than the webhook injects now (annotation %s): %s",
			n, v1alpha1.RegistrarImageAnnotation, names(p.outdatedImage)))
	}
	if len(p.outdatedSpec) > 0 {
		parts = append(parts, specDriftMessage(p.outdatedSpec))
	}
	return metav1.Condition{Type: v1alpha1.ConditionRegistrarCurrent, Status: metav1.ConditionFalse, Reason: reason,
		Message: truncate(fmt.Sprintf("%s. They keep registering with what they were given at injection; restart them (kubectl rollout restart of their workload) to give them the current registrar and settings",
			strings.Join(parts, "; ")), 2048)}
}

// registrarHealthy is False when the registrars of selected pods exit or
// cannot start: those pods are not in Eureka. It quotes what the registrars
// last said.
func registrarHealthy(s *v1alpha1.EurekaSyncer, obs *observed) metav1.Condition {
	if len(obs.pods.failing) == 0 {
		return metav1.Condition{Type: v1alpha1.ConditionRegistrarHealthy, Status: metav1.ConditionTrue, Reason: reasonRegistrarsRunning,
			Message: "no registrar of a selected pod is failing"}
	}
	return metav1.Condition{Type: v1alpha1.ConditionRegistrarHealthy, Status: metav1.ConditionFalse, Reason: reasonRegistrarFailing,
		Message: fmt.Sprintf("%s. These pods stay out of Eureka until their registrar runs: fix what it names (a bad value comes from the syncer's spec, the pod's %s annotations "+
			"or the manager's flags, and reaches a pod when it is restarted); kubectl logs <pod> -c %s --previous shows more",
			failingMessage(s.Namespace, obs.pods.failing), v1alpha1.AnnotationPrefix, v1alpha1.RegistrarContainerName)}
}

// registrarHealth is the syncer's RegistrarHealthy condition, or nil.
func registrarHealth(s *v1alpha1.EurekaSyncer) *metav1.Condition {
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionRegistrarHealthy); c != nil {
		return c.DeepCopy()
	}
	return nil
}

// reportRegistrarHealth records a Warning Event when registrars start
// failing or what they say changes, and a Normal one when none fails any
// more; nothing while it stays the same.
func (r *Reconciler) reportRegistrarHealth(s *v1alpha1.EurekaSyncer, previous *metav1.Condition) {
	now := registrarHealth(s)
	switch {
	case now == nil:
	case now.Status == metav1.ConditionFalse && (previous == nil || previous.Message != now.Message):
		r.recorder.Eventf(s, nil, corev1.EventTypeWarning, reasonRegistrarFailing, "Observe", "%s", truncate(now.Message, maxEventNote))
	case now.Status == metav1.ConditionTrue && previous != nil && previous.Status == metav1.ConditionFalse:
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, reasonRegistrarsRunning, "Observe", "%s", now.Message)
	}
}
