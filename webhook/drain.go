package webhook

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
)

// Names of what the drain helper adds to a pod.
const (
	drainVolume        = "eurekube-drain"
	drainMountPath     = "/eurekube-drain"
	drainInitContainer = "eurekube-drain-install"
	// drainVolumeLimit holds the helper (the registrar binary, ~7 MiB).
	drainVolumeLimit = "32Mi"
)

// drainPlan is how the drain reaches the pod's containers.
type drainPlan struct {
	// seconds of drain; 0 disables it.
	seconds int32
	// execOnly drains through the helper even where the kubelet's sleep
	// action would do (--exec-sleep-fallback: kubelets without the action).
	execOnly bool
	// image and resources of the helper's init container: the registrar's.
	image     string
	resources corev1.ResourceRequirements
}

// addDrain makes every container of the pod but the registrar keep serving
// for the drain after the registrar cancels the instance, then run its own
// preStop hook, and grows the grace period by the drain so the app keeps
// its original shutdown window (its own hook included) after it. Every
// container, not only the one serving the registered port: a container
// stopped early may be on the request path (a proxy, a database sidecar).
//
// Without a hook, or with a sleep hook, the kubelet's sleep action does it
// (sleep drain, or drain + the hook's seconds). An exec or httpGet hook
// cannot share a preStop with the sleep action, and the app image may have
// no shell and no sleep binary, so those containers exec the drain helper
// (the registrar binary, copied by an init container into a volume
// mounted read-only) which waits, then runs the hook as the kubelet would
// have. A tcpSocket hook was never run by the kubelet; the drain replaces
// it. What was composed or dropped is returned as adaptations.
func addDrain(pod *corev1.Pod, plan drainPlan) []v1alpha1.Adaptation {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.DrainAnnotation] = fmt.Sprint(plan.seconds)
	if plan.seconds <= 0 {
		return []v1alpha1.Adaptation{{Reason: v1alpha1.AdaptationDrainDisabled,
			Message: "the drain is 0 s: the pod stops serving as soon as it terminates, while callers may hold its instance for up to ~95 s (Eureka's response cache, the client's registry fetch and Spring Cloud LoadBalancer's cache)"}}
	}
	adaptations := drainContainers(pod, plan, func(*corev1.Container) bool { return true })
	grace := int64(defaultGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(grace + int64(plan.seconds))
	return adaptations
}

// drainLaterContainers gives the drain to the containers of an injected
// pod that do not have it yet: those a webhook called after Eurekube added
// (a classic mesh proxy, which would otherwise stop seconds into the drain
// and take the app's traffic with it). The grace period already covers the
// drain, so it stays as it is; init containers, native sidecars included,
// are stopped by the kubelet only after the app containers, so they need
// none. It returns what it adapted, nothing when every container is
// drained, so that a pod sent back unchanged stays unchanged.
func drainLaterContainers(pod *corev1.Pod, plan drainPlan) []v1alpha1.Adaptation {
	if plan.seconds <= 0 {
		return nil
	}
	var added []string
	adaptations := drainContainers(pod, plan, func(c *corev1.Container) bool {
		if drained(c, plan.seconds) {
			return false
		}
		added = append(added, c.Name)
		return true
	})
	if len(added) == 0 {
		return nil
	}
	return append(adaptations, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationDrainAdded,
		Message: fmt.Sprintf("container(s) %s, added after Eurekube injected the pod (by a later webhook), keep serving for the %d s drain too",
			strings.Join(added, ", "), plan.seconds)})
}

// drained is true when container c's preStop already waits for the drain:
// the drain helper, or a sleep at least as long as the drain (Eurekube's,
// or the container's own, which keeps it serving just as long).
func drained(c *corev1.Container, seconds int32) bool {
	if c.Name == v1alpha1.RegistrarContainerName {
		return true
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return false
	}
	h := c.Lifecycle.PreStop
	switch {
	case h.Sleep != nil:
		return h.Sleep.Seconds >= int64(seconds)
	case h.Exec != nil:
		return len(h.Exec.Command) > 0 && h.Exec.Command[0] == drainHelperPath
	}
	return false
}

// drainContainers composes the drain into every container but the
// registrar that selected accepts, and adds the drain helper (its volume
// and the init container that installs it) once, when a container needs
// it and the pod does not have it yet.
func drainContainers(pod *corev1.Pod, plan drainPlan, selected func(*corev1.Container) bool) []v1alpha1.Adaptation {
	wait := time.Duration(plan.seconds) * time.Second
	var adaptations []v1alpha1.Adaptation
	helper := false
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name == v1alpha1.RegistrarContainerName || !selected(c) {
			continue
		}
		handler, viaHelper, adaptation := composeDrain(c, wait, plan.execOnly)
		if c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{}
		}
		c.Lifecycle.PreStop = handler
		if viaHelper {
			helper = true
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == drainVolume }) {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: drainVolume, MountPath: drainMountPath, ReadOnly: true})
			}
		}
		if adaptation != nil {
			adaptations = append(adaptations, *adaptation)
		}
	}
	if helper && !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == drainVolume }) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: drainVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse(drainVolumeLimit))},
		}})
	}
	if helper && !slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == drainInitContainer }) {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
			Name:                     drainInitContainer,
			Image:                    plan.image,
			Args:                     []string{sidecar.InstallDrainCommand, drainMountPath},
			VolumeMounts:             []corev1.VolumeMount{{Name: drainVolume, MountPath: drainMountPath}},
			Resources:                plan.resources,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          restrictedSecurityContext(),
		})
	}
	return adaptations
}

// composeDrain returns container c's new preStop: the drain, then its own
// hook; whether it runs through the helper; and what was adapted.
func composeDrain(c *corev1.Container, wait time.Duration, execOnly bool) (*corev1.LifecycleHandler, bool, *v1alpha1.Adaptation) {
	composed := func(format string, args ...any) *v1alpha1.Adaptation {
		return &v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPreStopComposed,
			Message: fmt.Sprintf("container %s: ", c.Name) + fmt.Sprintf(format, args...)}
	}
	sleep := func(d time.Duration) (*corev1.LifecycleHandler, bool) {
		if execOnly {
			return helperHook(sidecar.Drain{Wait: d}), true
		}
		return &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: int64(d / time.Second)}}, false
	}

	var own *corev1.LifecycleHandler
	if c.Lifecycle != nil {
		own = c.Lifecycle.PreStop
	}
	switch {
	case own == nil:
		h, viaHelper := sleep(wait)
		return h, viaHelper, nil
	case own.Sleep != nil:
		total := wait + time.Duration(own.Sleep.Seconds)*time.Second
		h, viaHelper := sleep(total)
		return h, viaHelper, composed("its preStop sleep of %d s now follows the %s drain (%s in all)", own.Sleep.Seconds, secs(wait), secs(total))
	case own.Exec != nil:
		return helperHook(sidecar.Drain{Wait: wait, Command: own.Exec.Command}), true,
			composed("its preStop command %q runs after the %s drain, through the drain helper", own.Exec.Command, secs(wait))
	case own.HTTPGet != nil:
		get, err := resolveHookHTTPGet(c, own.HTTPGet)
		if err != nil {
			h, viaHelper := sleep(wait)
			return h, viaHelper, &v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPreStopDropped,
				Message: fmt.Sprintf("container %s: its preStop httpGet is dropped, since the kubelet could not run it either (%v); the %s drain replaces it", c.Name, err, secs(wait))}
		}
		return helperHook(sidecar.Drain{Wait: wait, HTTPGet: get}), true,
			composed("its preStop httpGet %s %s runs after the %s drain, through the drain helper", get.Scheme, get.Path, secs(wait))
	default: // tcpSocket: accepted by the API, never run by the kubelet
		h, viaHelper := sleep(wait)
		return h, viaHelper, &v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPreStopDropped,
			Message: fmt.Sprintf("container %s: its preStop tcpSocket hook, which the kubelet never runs, is replaced by the %s drain", c.Name, secs(wait))}
	}
}

// drainHelperPath is where containers exec the drain helper.
var drainHelperPath = path.Join(drainMountPath, sidecar.DrainBinary)

func helperHook(d sidecar.Drain) *corev1.LifecycleHandler {
	cmd := append([]string{drainHelperPath, sidecar.DrainCommand}, d.Args()...)
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

// resolveHookHTTPGet resolves a hook's port against the container's own
// ports, as the kubelet does.
func resolveHookHTTPGet(c *corev1.Container, get *corev1.HTTPGetAction) (*sidecar.DrainHTTPGet, error) {
	port := get.Port.IntVal
	if get.Port.Type == intstr.String {
		port = 0
		for _, cp := range c.Ports {
			if cp.Name == get.Port.StrVal {
				port = cp.ContainerPort
			}
		}
		if port == 0 {
			return nil, fmt.Errorf("port %q is not declared by the container", get.Port.StrVal)
		}
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is not from 1 to 65535", port)
	}
	out := &sidecar.DrainHTTPGet{Scheme: cmp.Or(string(get.Scheme), "HTTP"), Host: get.Host, Port: port, Path: cmp.Or(get.Path, "/")}
	for _, h := range get.HTTPHeaders {
		out.Headers = append(out.Headers, sidecar.DrainHeader{Name: h.Name, Value: h.Value})
	}
	return out, nil
}

// secs renders a drain for people: "100 s".
func secs(d time.Duration) string { return fmt.Sprintf("%d s", int64(d/time.Second)) }
