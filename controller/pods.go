package controller

import (
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/webhook"
)

// podCounts is what the pods a syncer's selector matches look like, from
// that syncer's point of view.
type podCounts struct {
	// selected: live pods injected by this syncer or by none; injected and
	// ready count among them.
	selected, injected, ready int32
	// ownApp: live pods this syncer injected whose registrar registers
	// the syncer's own app (no eurekube.io/app-name of another): what
	// earns the syncer's namespace the app (ownership.go).
	ownApp int32
	// skipped: live pods of this syncer the webhook left without the
	// registrar on purpose.
	skipped int32
	// notInjected names the selected pods without the registrar, sorted.
	notInjected []string
	// withoutDrain names the live pods this syncer injected whose drain is
	// absent or 0, sorted.
	withoutDrain []string
	// outdated names the live pods this syncer injected that run a
	// registrar image other than the current one, or were given other
	// settings than the current spec gives (outdatedSpec), sorted; a pod
	// counts once.
	outdated []string
	// outdatedImage names, sorted, those that run another registrar image.
	outdatedImage []string
	// outdatedSpec: those injected from an older spec, grouped by what
	// differs (specChanges), each list sorted.
	outdatedSpec map[string][]string
	// failing: the registrars of live selected pods that exit or cannot
	// start, by pod name.
	failing []registrarFailure
	// ownedByOthers: live pods another syncer injected, by that syncer,
	// each list sorted.
	ownedByOthers map[string][]string
	// adaptations of the live pods of this syncer (skipped ones included),
	// one entry per reason, sorted by reason.
	adaptations []v1alpha1.PodAdaptations
	// uids of every pod the selector matches that has not finished,
	// terminating ones and other syncers' included: an instance of any of
	// them is not an orphan. A finished pod's (Failed, Succeeded) is: its
	// registrar has stopped and cannot cancel or heartbeat any more.
	uids map[types.UID]struct{}
}

// countPods classifies the pods the selector of syncer s matches.
// Pods being deleted or finished are not counted: their registrar is
// leaving or gone. A pod another syncer injected (the webhook gives a pod
// to the oldest matching syncer) is registered under that syncer's app, so
// it is only counted as owned by it. A pod without the syncer annotation
// (created before injection was enabled, or opted out) is selected and
// named by PodsInjected. defaults are the manager's webhook defaults: the
// registrar image the webhook injects for s now (none known: no pod counts
// as on an older image) and what it gives a pod (registrars.go); memo, when
// not nil, spares parsing again the pods that did not change since the last
// count. now dates the registrars' failures.
func countPods(pods []corev1.Pod, s *v1alpha1.EurekaSyncer, defaults webhook.Defaults, memo *driftMemo, now time.Time) podCounts {
	c := podCounts{uids: make(map[types.UID]struct{}, len(pods)), ownedByOthers: map[string][]string{}}
	registrarImage := s.EffectiveRegistrarImage(defaults.RegistrarImage)
	drifts := memo.take(s)
	defer memo.keep(s, drifts)
	drift := func(pod *corev1.Pod) string { return drifts.of(pod, s, defaults) }
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if !finished(&pods[i]) {
			c.uids[pods[i].UID] = struct{}{}
		}
		if live(&pods[i]) {
			sorted = append(sorted, &pods[i])
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var mine []*corev1.Pod
	for _, pod := range sorted {
		owner := pod.Annotations[v1alpha1.SyncerAnnotation]
		switch {
		case owner != "" && owner != s.Name:
			c.ownedByOthers[owner] = append(c.ownedByOthers[owner], pod.Name)
			continue
		case owner == s.Name:
			mine = append(mine, pod)
			if pod.Annotations[v1alpha1.StatusAnnotation] == v1alpha1.StatusSkipped {
				c.skipped++
				continue
			}
		}
		c.selected++
		if v1alpha1.RunsRegistrar(pod) {
			c.injected++
			if owner == s.Name {
				c.countInjected(pod, registrarImage, drift)
				if app, ok := pod.Annotations[v1alpha1.AnnotationAppName]; !ok || strings.EqualFold(app, s.EffectiveAppName()) {
					c.ownApp++
				}
			}
			if words, failing := registrarFailureOf(pod, now); failing {
				c.failing = append(c.failing, registrarFailure{pod: pod.Name, words: words})
			}
		} else {
			c.notInjected = append(c.notInjected, pod.Name)
		}
		if podReady(pod) {
			c.ready++
		}
	}
	c.adaptations = aggregateAdaptations(mine)
	return c
}

// countInjected checks a live pod this syncer injected: its drain, its
// registrar's image and the settings it was given.
func (c *podCounts) countInjected(pod *corev1.Pod, registrarImage string, drift func(*corev1.Pod) string) {
	if !hasDrain(pod) {
		c.withoutDrain = append(c.withoutDrain, pod.Name)
	}
	outdated := false
	if registrarImage != "" && v1alpha1.InjectedRegistrarImage(pod) != registrarImage {
		c.outdatedImage = append(c.outdatedImage, pod.Name)
		outdated = true
	}
	if changes := drift(pod); changes != "" {
		if c.outdatedSpec == nil {
			c.outdatedSpec = map[string][]string{}
		}
		c.outdatedSpec[changes] = append(c.outdatedSpec[changes], pod.Name)
		outdated = true
	}
	if outdated {
		c.outdated = append(c.outdated, pod.Name)
	}
}

// ownedByOthersCount is how many selected pods other syncers injected.
func (c *podCounts) ownedByOthersCount() int32 {
	var n int32
	for _, pods := range c.ownedByOthers {
		n += int32(len(pods))
	}
	return n
}

// hasDrain: the webhook recorded a drain of at least one second. Pods
// injected before drains were recorded have no annotation, and their drain
// cannot be known, so they count as without one.
func hasDrain(pod *corev1.Pod) bool {
	seconds, err := strconv.Atoi(pod.Annotations[v1alpha1.DrainAnnotation])
	return err == nil && seconds > 0
}

// registrarPodsOf names, sorted, the pods that run the registrar the named
// syncer injected and have not finished, terminating ones included (their
// registrar has not left yet): alive, all of them, which could still
// register or heartbeat; notDetached, those among them not yet told that
// the syncer is gone (annotation eurekube.io/traffic: Detached).
func registrarPodsOf(pods []corev1.Pod, syncer string) (alive, notDetached []string) {
	for i := range pods {
		pod := &pods[i]
		if pod.Annotations[v1alpha1.SyncerAnnotation] != syncer || !v1alpha1.RunsRegistrar(pod) || finished(pod) {
			continue
		}
		alive = append(alive, pod.Name)
		if pod.Annotations[v1alpha1.TrafficAnnotation] != v1alpha1.TrafficDetached {
			notDetached = append(notDetached, pod.Name)
		}
	}
	sort.Strings(alive)
	sort.Strings(notDetached)
	return alive, notDetached
}

func live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !finished(pod)
}

// finished: the pod's containers have all stopped for good (phase Failed,
// an evicted pod among them, or Succeeded): its registrar can neither
// heartbeat nor cancel, so its instance counts as an orphan.
func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
