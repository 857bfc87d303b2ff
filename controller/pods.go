package controller

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// podCounts is what the selected pods look like.
type podCounts struct {
	selected, injected, ready int32
	// notInjected names the selected pods without the registrar, sorted.
	notInjected []string
	// uids of every selected pod, terminated ones included: an instance of
	// any of them is not an orphan.
	uids map[types.UID]struct{}
}

// countPods counts the running pods among the selected ones. Pods being
// deleted or finished no longer count as selected: their registrar is
// leaving or gone.
func countPods(pods []corev1.Pod) podCounts {
	c := podCounts{uids: make(map[types.UID]struct{}, len(pods))}
	for i := range pods {
		pod := &pods[i]
		c.uids[pod.UID] = struct{}{}
		if !live(pod) {
			continue
		}
		c.selected++
		if hasRegistrar(pod) {
			c.injected++
		} else {
			c.notInjected = append(c.notInjected, pod.Name)
		}
		if podReady(pod) {
			c.ready++
		}
	}
	sort.Strings(c.notInjected)
	return c
}

// podsRunningRegistrarOf names the pods, sorted, that still run the
// registrar the named syncer injected (terminating ones included: their
// registrar has not left yet).
func podsRunningRegistrarOf(pods []corev1.Pod, syncer string) []string {
	var out []string
	for i := range pods {
		pod := &pods[i]
		if pod.Annotations[v1alpha1.SyncerAnnotation] == syncer && hasRegistrar(pod) && !finished(pod) {
			out = append(out, pod.Name)
		}
	}
	sort.Strings(out)
	return out
}

func live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !finished(pod)
}

func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func hasRegistrar(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == v1alpha1.RegistrarContainerName {
			return true
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
