package webhook

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
)

// Defaults of the lease and the health check when neither the syncer nor the
// probe sets them (the CRD's defaults, repeated for syncers created before a
// default existed).
const (
	defaultRenewalIntervalSeconds = 30
	defaultLeaseDurationSeconds   = 90
	defaultGracePeriodSeconds     = 30
	// registrarShutdownTimeout bounds the cancel on SIGTERM.
	registrarShutdownTimeout = 5 * time.Second
	registrarUID             = 65532
	registrarHealthPath      = "/healthz"
	registrarPortName        = "eurekube-health"
)

// Config is everything Mutate needs besides the pod.
type Config struct {
	// Syncer registers the pod.
	Syncer *v1alpha1.EurekaSyncer
	// Overrides are the pod's parsed annotations.
	Overrides Overrides
	// Defaults are the manager's settings.
	Defaults Defaults
}

// Mutate returns a copy of pod with the registrar added, every app
// container's preStop drain, the longer grace period and the annotations
// (status, syncer, drain, adaptations), plus what was adapted or could not
// be done, which the annotation records too. pod is not modified. An error
// means the syncer and the pod do not fit together (for example a port name
// that no container declares); it names what to fix.
func Mutate(pod *corev1.Pod, cfg Config) (*corev1.Pod, []v1alpha1.Adaptation, error) {
	if cfg.Syncer == nil {
		return nil, nil, fmt.Errorf("no syncer to inject")
	}
	out := pod.DeepCopy()
	var adaptations []v1alpha1.Adaptation
	spec := &cfg.Syncer.Spec

	port, portSource, err := resolveRegisteredPort(out, cfg)
	if err != nil {
		return nil, nil, err
	}
	app, found := containerServing(out, port)
	if !found && len(out.Spec.Containers) > 1 {
		adaptations = append(adaptations, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPortNotDeclared,
			Message: fmt.Sprintf("no container declares port %d (%s); the health check follows the first container, %s",
				port, portSource, out.Spec.Containers[app].Name)})
	}

	env, err := registrarEnv(out, app, port, cfg)
	if err != nil {
		return nil, nil, err
	}

	image := cmp.Or(spec.Sidecar.Image, cfg.Defaults.RegistrarImage)
	if image == "" {
		return nil, nil, fmt.Errorf("no registrar image: set spec.sidecar.image of EurekaSyncer %s or the manager's --registrar-image", cfg.Syncer.Name)
	}

	listenPort := cfg.Defaults.RegistrarPort
	if listenPort == 0 {
		listenPort = sidecar.DefaultListenPort
	}
	if taken := declaredPorts(out); taken[listenPort] {
		free := listenPort
		for taken[free] && free < 65535 {
			free++
		}
		adaptations = append(adaptations, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationRegistrarPortMoved,
			Message: fmt.Sprintf("port %d is declared by a container of the pod; the registrar listens on %d instead", listenPort, free)})
		listenPort = free
	}
	if out.Spec.HostNetwork {
		adaptations = append(adaptations, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationHostNetwork,
			Message: fmt.Sprintf("hostNetwork pod: the registrar listens on port %d of the node; another hostNetwork pod using that port on the same node makes it fail its liveness probe", listenPort)})
	}
	env = append(env, corev1.EnvVar{Name: sidecar.EnvListenAddr, Value: ":" + strconv.Itoa(int(listenPort))})

	res := resources(cfg)
	out.Spec.Containers = append(out.Spec.Containers, registrarContainer(image, listenPort, env, res))
	adaptations = append(adaptations, addDrain(out, drainPlan{
		seconds: preStopSleep(cfg), execOnly: cfg.Defaults.ExecSleepFallback, image: image, resources: res,
	})...)

	annotate(out, v1alpha1.StatusInjected, cfg.Syncer.Name, adaptations)
	return out, adaptations, nil
}

// Skip returns a copy of pod that syncer selects but that stays without the
// registrar on purpose, annotated with why, so that the reconciler reports
// it like any other adaptation.
func Skip(pod *corev1.Pod, syncer string, why v1alpha1.Adaptation) *corev1.Pod {
	out := pod.DeepCopy()
	annotate(out, v1alpha1.StatusSkipped, syncer, []v1alpha1.Adaptation{why})
	return out
}

// annotate records the outcome on the pod, where the reconciler reads it.
func annotate(pod *corev1.Pod, status, syncer string, adaptations []v1alpha1.Adaptation) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.StatusAnnotation] = status
	pod.Annotations[v1alpha1.SyncerAnnotation] = syncer
	if len(adaptations) > 0 {
		pod.Annotations[v1alpha1.AdaptationsAnnotation] = v1alpha1.EncodeAdaptations(adaptations)
	}
}

// resolveRegisteredPort returns the registered port number and where it
// came from (for messages).
func resolveRegisteredPort(pod *corev1.Pod, cfg Config) (int32, string, error) {
	if p := cfg.Overrides.Port; p != nil {
		n, err := resolvePort(pod, *p, "annotation "+AnnotationPort)
		return n, "annotation " + AnnotationPort, err
	}
	source := fmt.Sprintf("spec.port of EurekaSyncer %s", cfg.Syncer.Name)
	n, err := resolvePort(pod, cfg.Syncer.Spec.Port, source)
	return n, source, err
}

// resolvePort turns a port number or a container port name into a number.
func resolvePort(pod *corev1.Pod, p intstr.IntOrString, source string) (int32, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fmt.Errorf("port %d (%s) is not from 1 to 65535", p.IntVal, source)
		}
		return p.IntVal, nil
	}
	var declared []string
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort, nil
			}
			if cp.Name != "" {
				declared = append(declared, cp.Name)
			}
		}
	}
	if len(declared) == 0 {
		return 0, fmt.Errorf("port %q (%s) is not declared by any container of the pod, which names no ports; name a container port %q or use a number", p.StrVal, source, p.StrVal)
	}
	return 0, fmt.Errorf("port %q (%s) is not declared by any container of the pod; declared: %s", p.StrVal, source, strings.Join(declared, ", "))
}

// containerServing is the index of the container that declares port, else
// the first container (found false).
func containerServing(pod *corev1.Pod, port int32) (int, bool) {
	for i, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.ContainerPort == port {
				return i, true
			}
		}
	}
	return 0, false
}

func declaredPorts(pod *corev1.Pod) map[int32]bool {
	taken := map[int32]bool{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				taken[cp.ContainerPort] = true
			}
		}
	}
	return taken
}

// registrarEnv is the env contract of sidecar/env.go.
func registrarEnv(pod *corev1.Pod, app int, port int32, cfg Config) ([]corev1.EnvVar, error) {
	spec := &cfg.Syncer.Spec
	o := &cfg.Overrides

	appName := cfg.Syncer.EffectiveAppName()
	if o.AppName != "" {
		appName = strings.ToUpper(o.AppName)
	}
	vip := cmp.Or(o.VIPAddress, spec.VIPAddress, strings.ToLower(appName))
	secureVIP := cmp.Or(o.SecureVIPAddress, spec.SecureVIPAddress, strings.ToLower(appName))

	urls := spec.Eureka.ServiceURLs
	if len(urls) == 0 {
		urls = cfg.Defaults.EurekaURLs
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("no Eureka server: set spec.eureka.serviceURLs of EurekaSyncer %s or the manager's --eureka-url", cfg.Syncer.Name)
	}

	env := []corev1.EnvVar{
		fieldEnv(sidecar.EnvPodName, "metadata.name"),
		fieldEnv(sidecar.EnvPodNamespace, "metadata.namespace"),
		fieldEnv(sidecar.EnvPodUID, "metadata.uid"),
		fieldEnv(sidecar.EnvPodIP, "status.podIP"),
		fieldEnv(sidecar.EnvNodeName, "spec.nodeName"),
		{Name: sidecar.EnvAppName, Value: appName},
		{Name: sidecar.EnvVIPAddress, Value: vip},
		{Name: sidecar.EnvPort, Value: strconv.Itoa(int(port))},
	}

	securePort := spec.SecurePort
	securePortSource := fmt.Sprintf("spec.securePort of EurekaSyncer %s", cfg.Syncer.Name)
	if o.SecurePort != nil {
		securePort, securePortSource = o.SecurePort, "annotation "+AnnotationSecurePort
	}
	if securePort != nil {
		n, err := resolvePort(pod, *securePort, securePortSource)
		if err != nil {
			return nil, err
		}
		if n == port {
			return nil, fmt.Errorf("secure port %d (%s) equals the registered port", n, securePortSource)
		}
		env = append(env,
			corev1.EnvVar{Name: sidecar.EnvSecurePort, Value: strconv.Itoa(int(n))},
			corev1.EnvVar{Name: sidecar.EnvSecureVIPAddress, Value: secureVIP})
	}

	env = append(env, corev1.EnvVar{Name: sidecar.EnvEurekaURLs, Value: strings.Join(urls, ",")})
	if ref := spec.Eureka.CredentialsSecretRef; ref != nil && ref.Name != "" {
		env = append(env, secretEnv(sidecar.EnvEurekaUsername, ref.Name, "username"), secretEnv(sidecar.EnvEurekaPassword, ref.Name, "password"))
	}

	if md := metadata(cfg); len(md) > 0 {
		raw, err := json.Marshal(md)
		if err != nil {
			return nil, fmt.Errorf("encode metadata: %w", err)
		}
		env = append(env, corev1.EnvVar{Name: sidecar.EnvMetadata, Value: string(raw)})
	}
	env = append(env,
		corev1.EnvVar{Name: sidecar.EnvClusterID, Value: cfg.Defaults.ClusterID},
		corev1.EnvVar{Name: sidecar.EnvSyncer, Value: cfg.Syncer.Name})

	health, err := resolveHealthCheck(pod, app, port, cfg)
	if err != nil {
		return nil, err
	}
	env = append(env, health.env()...)

	renewal := orDefault(spec.Lease.RenewalIntervalSeconds, defaultRenewalIntervalSeconds)
	duration := orDefault(spec.Lease.DurationSeconds, defaultLeaseDurationSeconds)
	env = append(env,
		corev1.EnvVar{Name: sidecar.EnvLeaseRenewalInterval, Value: seconds(renewal)},
		corev1.EnvVar{Name: sidecar.EnvLeaseDuration, Value: seconds(duration)},
		corev1.EnvVar{Name: sidecar.EnvShutdownTimeout, Value: registrarShutdownTimeout.String()},
		corev1.EnvVar{Name: sidecar.EnvLogLevel, Value: cmp.Or(cfg.Defaults.RegistrarLogLevel, "info")})
	return env, nil
}

// metadata merges the syncer's metadata with the pod's annotations; the
// pod wins.
func metadata(cfg Config) map[string]string {
	if len(cfg.Syncer.Spec.Metadata) == 0 && len(cfg.Overrides.Metadata) == 0 {
		return nil
	}
	md := make(map[string]string, len(cfg.Syncer.Spec.Metadata)+len(cfg.Overrides.Metadata))
	for k, v := range cfg.Syncer.Spec.Metadata {
		md[k] = v
	}
	for k, v := range cfg.Overrides.Metadata {
		md[k] = v
	}
	return md
}

// healthCheck is the resolved health check of the registrar.
type healthCheck struct {
	kind             v1alpha1.HealthCheckType
	scheme, path     string
	port             int32
	period, timeout  int32
	failureThreshold int32
	successThreshold int32
}

func (h healthCheck) env() []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: sidecar.EnvHealthType, Value: strings.ToLower(string(h.kind))}}
	if h.kind == v1alpha1.HealthCheckHTTP {
		env = append(env,
			corev1.EnvVar{Name: sidecar.EnvHealthScheme, Value: h.scheme},
			corev1.EnvVar{Name: sidecar.EnvHealthPath, Value: h.path})
	}
	return append(env,
		corev1.EnvVar{Name: sidecar.EnvHealthPort, Value: strconv.Itoa(int(h.port))},
		corev1.EnvVar{Name: sidecar.EnvHealthPeriod, Value: seconds(h.period)},
		corev1.EnvVar{Name: sidecar.EnvHealthTimeout, Value: seconds(h.timeout)},
		corev1.EnvVar{Name: sidecar.EnvHealthFailureThreshold, Value: strconv.Itoa(int(h.failureThreshold))},
		corev1.EnvVar{Name: sidecar.EnvHealthSuccessThreshold, Value: strconv.Itoa(int(h.successThreshold))})
}

// resolveHealthCheck picks the syncer's healthCheck, else the app
// container's readinessProbe (httpGet or tcpSocket), else TCP on the
// registered port; then applies the pod's annotations.
func resolveHealthCheck(pod *corev1.Pod, app int, port int32, cfg Config) (healthCheck, error) {
	h := healthCheck{kind: v1alpha1.HealthCheckTCP, scheme: "HTTP", port: port, period: 5, timeout: 1, failureThreshold: 3, successThreshold: 1}
	var probePort *intstr.IntOrString
	portSource := ""
	if hc := cfg.Syncer.Spec.HealthCheck; hc != nil {
		h.kind, h.path = hc.Type, hc.Path
		h.scheme = cmp.Or(hc.Scheme, "HTTP")
		h.period = orDefault(hc.PeriodSeconds, 5)
		h.timeout = orDefault(hc.TimeoutSeconds, 1)
		h.failureThreshold = orDefault(hc.FailureThreshold, 3)
		h.successThreshold = orDefault(hc.SuccessThreshold, 1)
		probePort, portSource = hc.Port, fmt.Sprintf("spec.healthCheck.port of EurekaSyncer %s", cfg.Syncer.Name)
	} else if p := pod.Spec.Containers[app].ReadinessProbe; p != nil && (p.HTTPGet != nil || p.TCPSocket != nil) {
		// Kubernetes' probe defaults, since the registrar mirrors the probe.
		h.period = orDefault(p.PeriodSeconds, 10)
		h.timeout = orDefault(p.TimeoutSeconds, 1)
		h.failureThreshold = orDefault(p.FailureThreshold, 3)
		h.successThreshold = orDefault(p.SuccessThreshold, 1)
		source := fmt.Sprintf("the readinessProbe of container %s", pod.Spec.Containers[app].Name)
		if p.HTTPGet != nil {
			h.kind, h.path = v1alpha1.HealthCheckHTTP, cmp.Or(p.HTTPGet.Path, "/")
			h.scheme = cmp.Or(string(p.HTTPGet.Scheme), "HTTP")
			probePort, portSource = &p.HTTPGet.Port, source
		} else {
			probePort, portSource = &p.TCPSocket.Port, source
		}
	}

	o := &cfg.Overrides
	if o.HealthPort != nil {
		probePort, portSource = o.HealthPort, "annotation "+AnnotationHealthPort
	}
	if probePort != nil {
		n, err := resolvePort(pod, *probePort, portSource)
		if err != nil {
			return healthCheck{}, err
		}
		h.port = n
	}
	if o.HealthType != "" {
		h.kind = o.HealthType
	} else if o.HealthPath != "" {
		h.kind = v1alpha1.HealthCheckHTTP
	}
	if o.HealthPath != "" {
		h.path = o.HealthPath
	}
	if o.HealthScheme != "" {
		h.scheme = o.HealthScheme
	}
	if h.kind == v1alpha1.HealthCheckHTTP && h.path == "" {
		return healthCheck{}, fmt.Errorf("annotation %s: invalid value %q: an HTTP health check needs a path; set %s too",
			AnnotationHealthType, o.HealthType, AnnotationHealthPath)
	}
	return h, nil
}

func registrarContainer(image string, listenPort int32, env []corev1.EnvVar, res corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{
		Name:  v1alpha1.RegistrarContainerName,
		Image: image,
		Ports: []corev1.ContainerPort{{Name: registrarPortName, ContainerPort: listenPort, Protocol: corev1.ProtocolTCP}},
		Env:   env,
		// Liveness only: a readiness probe would take the pod out of its
		// Services whenever Eureka is in trouble.
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: registrarHealthPath, Port: intstr.FromInt32(listenPort), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1,
		},
		Resources:                res,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedSecurityContext(),
	}
}

// restrictedSecurityContext passes Pod Security "restricted": the registrar
// and the drain helper's installer run with it.
func restrictedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](registrarUID),
		RunAsGroup:               ptr.To[int64](registrarUID),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// resources are the syncer's, else the manager's, with the pod's cpu and
// memory annotations setting both request and limit.
func resources(cfg Config) corev1.ResourceRequirements {
	res := cfg.Defaults.RegistrarResources.DeepCopy()
	if r := cfg.Syncer.Spec.Sidecar.Resources; r != nil {
		res = r.DeepCopy()
	}
	if q := cfg.Overrides.SidecarCPU; q != nil {
		setResource(res, corev1.ResourceCPU, *q)
	}
	if q := cfg.Overrides.SidecarMemory; q != nil {
		setResource(res, corev1.ResourceMemory, *q)
	}
	return *res
}

// setResource makes an annotation's quantity both the request and the
// limit of one resource.
func setResource(res *corev1.ResourceRequirements, name corev1.ResourceName, q resource.Quantity) {
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	if res.Limits == nil {
		res.Limits = corev1.ResourceList{}
	}
	res.Requests[name] = q.DeepCopy()
	res.Limits[name] = q.DeepCopy()
}

// preStopSleep is the pod's annotation, else the syncer's drain, else the
// manager's default.
func preStopSleep(cfg Config) int32 {
	if s := cfg.Overrides.PreStopSleep; s != nil {
		return *s
	}
	if s := cfg.Syncer.Spec.Drain.PreStopSleepSeconds; s != nil {
		return *s
	}
	return cfg.Defaults.PreStopSleepSeconds
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

func seconds(n int32) string { return (time.Duration(n) * time.Second).String() }

func orDefault(v, def int32) int32 {
	if v > 0 {
		return v
	}
	return def
}
