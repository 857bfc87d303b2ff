package webhook

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// Kubernetes' own defaults: the grace period of a pod, and those of a
// readinessProbe, which the registrar mirrors when it follows the probe.
// The registrar's defaults are sidecar.Defaults.
const (
	defaultGracePeriodSeconds = 30
	probeDefaultPeriod        = 10 * time.Second
	probeDefaultTimeout       = time.Second
	probeDefaultFailures      = 3
	probeDefaultSuccesses     = 1
)

const (
	registrarHealthPath = "/healthz"
	registrarPortName   = "eurekube-health"
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

// Mutate returns a copy of pod with the registrar added (and the
// downward-API volume of its traffic file, and the projected volumes of
// its Eureka files and its gateway token when it has them), every app
// container's preStop drain, the longer grace period and the annotations
// (status, syncer, traffic, drain, adaptations), plus what was adapted or
// could not be done, which the annotation records too. pod is not modified. An error
// means the syncer and the pod do not fit together (for example a port name
// that no container declares); it names what to fix.
func Mutate(pod *corev1.Pod, cfg Config) (*corev1.Pod, []v1alpha1.Adaptation, error) {
	if cfg.Syncer == nil {
		return nil, nil, fmt.Errorf("no syncer to inject")
	}
	out := pod.DeepCopy()
	var adaptations []v1alpha1.Adaptation

	settings, adaptation, err := resolve(out, cfg)
	if err != nil {
		return nil, nil, err
	}
	if adaptation != nil {
		adaptations = append(adaptations, *adaptation)
	}

	image := cfg.Syncer.EffectiveRegistrarImage(cfg.Defaults.RegistrarImage)
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
	settings.ListenAddr = ":" + strconv.Itoa(int(listenPort))

	res := resources(cfg)
	addPodInfo(out, cfg.Syncer, settings.ZoneFile != "")
	mounts := []corev1.VolumeMount{podInfoMount()}
	if addEurekaFiles(out, cfg.Syncer.Spec.Eureka, &settings) {
		mounts = append(mounts, eurekaFilesMount())
	}
	if addGatewayToken(out, cfg.Defaults, &settings) {
		mounts = append(mounts, gatewayTokenMount())
	}
	rendered := settings.Env()
	if err := registrarAccepts(rendered); err != nil {
		return nil, nil, err
	}
	out.Spec.Containers = append(out.Spec.Containers, registrarContainer(image, listenPort, registrarEnv(rendered), mounts, res))
	adaptations = append(adaptations, addDrain(out, drainPlan{
		seconds: preStopSleep(cfg), execOnly: cfg.Defaults.ExecSleepFallback, image: image, resources: res,
	})...)

	annotate(out, v1alpha1.StatusInjected, cfg.Syncer.Name, adaptations)
	out.Annotations[v1alpha1.RegistrarImageAnnotation] = image
	return out, adaptations, nil
}

// Settings are the registrar settings that Mutate renders for pod under
// cfg, before the registrar's listen address (which depends on the pod's
// other ports). The reconciler compares them with what a running pod's
// registrar was given, to name pods injected from an older spec.
func Settings(pod *corev1.Pod, cfg Config) (sidecar.Config, error) {
	s, _, err := resolve(pod, cfg)
	return s, err
}

// resolve picks the registered port and the container serving it, and
// resolves the registrar's settings; the adaptation says that no container
// declares the port.
func resolve(pod *corev1.Pod, cfg Config) (sidecar.Config, *v1alpha1.Adaptation, error) {
	port, portSource, err := resolveRegisteredPort(pod, cfg)
	if err != nil {
		return sidecar.Config{}, nil, err
	}
	var adaptation *v1alpha1.Adaptation
	app, found := containerServing(pod, port)
	if !found && len(pod.Spec.Containers) > 1 {
		adaptation = &v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPortNotDeclared,
			Message: fmt.Sprintf("no container declares port %d (%s); the health check follows the first container, %s",
				port, portSource, pod.Spec.Containers[app].Name)}
	}
	settings, err := registrarSettings(pod, app, port, cfg)
	return settings, adaptation, err
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
		n, err := resolvePort(pod, *p, "annotation "+v1alpha1.AnnotationPort)
		return n, "annotation " + v1alpha1.AnnotationPort, err
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

// registrarSettings resolves the registrar's settings purely: the
// registrar's defaults, then the syncer, the app container's readinessProbe,
// the manager's defaults and the pod's annotations. The pod's identity and
// the credentials are left to the downward API and the Secret
// (registrarEnv).
func registrarSettings(pod *corev1.Pod, app int, port int32, cfg Config) (sidecar.Config, error) {
	spec := &cfg.Syncer.Spec
	o := &cfg.Overrides

	appName := cfg.Syncer.EffectiveAppName()
	if o.AppName != "" {
		appName = strings.ToUpper(o.AppName)
	}
	s := sidecar.Defaults(appName, int(port))
	s.VIPAddress = cmp.Or(o.VIPAddress, spec.VIPAddress, s.VIPAddress)
	s.SecureVIPAddress = cmp.Or(o.SecureVIPAddress, spec.SecureVIPAddress, s.SecureVIPAddress)

	// A syncer stored before the CRD refused credentials in URLs may still
	// hold them; the registrar would refuse them (the manager's own were
	// checked at its start).
	for i, u := range spec.Eureka.ServiceURLs {
		if err := eureka.CheckServerURL(u); err != nil {
			return sidecar.Config{}, fmt.Errorf("spec.eureka.serviceURLs[%d] %q of EurekaSyncer %s: %w", i, eureka.Redact(u), cfg.Syncer.Name, err)
		}
	}
	s.EurekaURLs = spec.Eureka.ServiceURLs
	if len(s.EurekaURLs) == 0 {
		s.EurekaURLs = cfg.Defaults.EurekaURLs
	}
	if len(s.EurekaURLs) == 0 {
		return sidecar.Config{}, fmt.Errorf("no Eureka server: set spec.eureka.serviceURLs of EurekaSyncer %s or the manager's --eureka-url", cfg.Syncer.Name)
	}

	securePort := spec.SecurePort
	securePortSource := fmt.Sprintf("spec.securePort of EurekaSyncer %s", cfg.Syncer.Name)
	if o.SecurePort != nil {
		securePort, securePortSource = o.SecurePort, "annotation "+v1alpha1.AnnotationSecurePort
	}
	if securePort != nil {
		n, err := resolvePort(pod, *securePort, securePortSource)
		if err != nil {
			return sidecar.Config{}, err
		}
		if n == port {
			return sidecar.Config{}, fmt.Errorf("secure port %d (%s) equals the registered port", n, securePortSource)
		}
		s.SecurePort = int(n)
	}

	s.Metadata = metadata(cfg)
	s.ClusterID = cfg.Defaults.ClusterID
	s.Syncer = cfg.Syncer.Name
	s.TrafficFile = trafficFile
	if _, set := s.Metadata[sidecar.MetaZone]; !set {
		s.ZoneFile = zoneFile
	}

	health, err := resolveHealthCheck(pod, app, s.Health, cfg)
	if err != nil {
		return sidecar.Config{}, err
	}
	s.Health = health
	s.Protocol = protocol(pod, app, port, cfg)
	if s.Protocol == sidecar.ProtocolHTTP {
		if s.Management, err = resolveManagement(pod, s, cfg); err != nil {
			return sidecar.Config{}, err
		}
	}

	s.RenewalInterval = orDefault(spec.Lease.RenewalIntervalSeconds, s.RenewalInterval)
	s.LeaseDuration = orDefault(spec.Lease.DurationSeconds, s.LeaseDuration)
	s.LogLevel = cmp.Or(cfg.Defaults.RegistrarLogLevel, s.LogLevel)
	return s, nil
}

// registrarAccepts runs the registrar's own parsing over what the
// registrar will read (rendered, the settings' Env), the pod's identity
// (downward API) standing in as placeholders: one validation, the
// registrar's, so that a setting it would refuse denies the pod here,
// with its reason, and never first crash-loops a container.
//
// The registrar's answer depends on rendered alone, and the pods of one
// workload render the same settings, so it is kept (acceptedSettings).
func registrarAccepts(rendered []sidecar.EnvVar) error {
	if err := parseSettings(rendered).err; err != nil {
		return fmt.Errorf("the registrar would refuse its settings: %w", err)
	}
	return nil
}

// acceptedSettings keeps what sidecar.ParseInjected says of each
// environment: the settings the webhook renders (registrarAccepts), then
// the same settings read back from the pod it admits (registrars.go).
var acceptedSettings = newVerdictCache[settingsVerdict]()

// maxAcceptedSettings bounds each verdictCache: past it, it starts again
// empty. A cluster renders about one environment per syncer and workload.
const maxAcceptedSettings = 4096

// verdictCache keeps what a parse of an environment said, by the
// environment's key, up to maxAcceptedSettings of them.
type verdictCache[V any] struct {
	mu       sync.RWMutex
	verdicts map[string]V
}

func newVerdictCache[V any]() *verdictCache[V] {
	return &verdictCache[V]{verdicts: map[string]V{}}
}

// once is the verdict kept for key, else compute's, then kept under a
// copy of key. Looking key up copies nothing.
func (c *verdictCache[V]) once(key []byte, compute func() V) V {
	c.mu.RLock()
	v, ok := c.verdicts[string(key)] // no copy of key to look it up
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = compute()
	c.mu.Lock()
	if len(c.verdicts) >= maxAcceptedSettings {
		clear(c.verdicts)
	}
	c.verdicts[string(key)] = v
	c.mu.Unlock()
	return v
}

// envKeyBuffer is the room for an environment's key on the stack, so
// that looking an environment up allocates nothing: the registrar's
// environment takes about a kilobyte; a longer one spills to the heap.
const envKeyBuffer = 2048

// settingsVerdict is what sidecar.ParseInjected said of an environment:
// the settings (read only: shared by every pod of that environment), or
// why the registrar would refuse them.
type settingsVerdict struct {
	settings sidecar.Config
	err      error
}

// parseSettings is sidecar.ParseInjected(env)'s settings and error,
// parsed once per environment (acceptedSettings).
func parseSettings(env []sidecar.EnvVar) settingsVerdict {
	var buf [envKeyBuffer]byte
	return acceptedSettings.once(appendEnvKey(buf[:0], env), func() settingsVerdict {
		s, err := sidecar.ParseInjected(env)
		return settingsVerdict{settings: s, err: err}
	})
}

// appendEnvKey appends env as one key to b, one key per environment:
// every name and value written after its length, in env's order.
func appendEnvKey(b []byte, env []sidecar.EnvVar) []byte {
	for _, e := range env {
		b = appendLengthPrefixed(b, e.Name)
		b = appendLengthPrefixed(b, e.Value)
	}
	return b
}

// appendLengthPrefixed appends s to b after its length and a ':', so that
// keys made of such strings tell every sequence of them apart.
func appendLengthPrefixed(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	return append(append(b, ':'), s...)
}

// InjectedSettings are the settings the registrar of an injected pod was
// given, as the registrar reads them (sidecar.ParseInjected over its
// container's literal variables). ok is false for a pod without a
// registrar or with settings the registrar would refuse.
func InjectedSettings(pod *corev1.Pod) (s sidecar.Config, ok bool) {
	env := literalEnv(pod)
	if env == nil {
		return sidecar.Config{}, false
	}
	s, err := sidecar.ParseInjected(env)
	return s, err == nil
}

// injectedAppName is InjectedSettings(pod).AppName, parsed once per
// registrar environment (acceptedSettings).
func injectedAppName(pod *corev1.Pod) (app string, ok bool) {
	env := literalEnv(pod)
	if env == nil {
		return "", false
	}
	v := parseSettings(env)
	return v.settings.AppName, v.err == nil
}

// literalEnv is the literal variables of pod's registrar, as the kubelet
// gives them ($$ read as $, registrarEnv's escape), nil without a
// registrar.
func literalEnv(pod *corev1.Pod) []sidecar.EnvVar {
	c := v1alpha1.RegistrarContainer(pod)
	if c == nil {
		return nil
	}
	env := make([]sidecar.EnvVar, 0, len(c.Env))
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, sidecar.EnvVar{Name: e.Name, Value: expand(e.Value, noVariables)})
		}
	}
	return env
}

// noVariables knows no variable: expand then only unescapes $$.
func noVariables(string) (string, bool) { return "", false }

// registrarEnv is the container's environment: the pod's identity from
// the downward API, then the settings as sidecar renders them (rendered,
// the settings' Env). Credentials are files of a volume (eurekafiles.go),
// never variables.
func registrarEnv(rendered []sidecar.EnvVar) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(rendered)+5)
	env = append(env,
		fieldEnv(sidecar.EnvPodName, "metadata.name"),
		fieldEnv(sidecar.EnvPodNamespace, "metadata.namespace"),
		fieldEnv(sidecar.EnvPodUID, "metadata.uid"),
		fieldEnv(sidecar.EnvPodIP, "status.podIP"),
		fieldEnv(sidecar.EnvNodeName, "spec.nodeName"))
	for _, e := range rendered {
		// $ is escaped as $$: the kubelet expands $(VAR) in values, so a
		// syncer's metadata or path holding "$(" would otherwise reach the
		// registrar changed, or read as a reference the webhook refuses.
		env = append(env, corev1.EnvVar{Name: e.Name, Value: strings.ReplaceAll(e.Value, "$", "$$")})
	}
	return env
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

// resolveHealthCheck picks the syncer's healthCheck, else the app
// container's readinessProbe (httpGet or tcpSocket), else h (the
// registrar's default: TCP on the registered port); then applies the pod's
// annotations.
func resolveHealthCheck(pod *corev1.Pod, app int, h sidecar.HealthConfig, cfg Config) (sidecar.HealthConfig, error) {
	var probePort *intstr.IntOrString
	portSource := ""
	if hc := cfg.Syncer.Spec.HealthCheck; hc != nil {
		h.Type, h.Path, h.Scheme = strings.ToLower(string(hc.Type)), hc.Path, hc.Scheme
		h.Period = orDefault(hc.PeriodSeconds, h.Period)
		h.Timeout = orDefault(hc.TimeoutSeconds, h.Timeout)
		h.FailureThreshold = countOr(hc.FailureThreshold, h.FailureThreshold)
		h.SuccessThreshold = countOr(hc.SuccessThreshold, h.SuccessThreshold)
		probePort, portSource = hc.Port, fmt.Sprintf("spec.healthCheck.port of EurekaSyncer %s", cfg.Syncer.Name)
	} else if p := pod.Spec.Containers[app].ReadinessProbe; p != nil && (p.HTTPGet != nil || p.TCPSocket != nil || p.GRPC != nil) {
		h.Period = orDefault(p.PeriodSeconds, probeDefaultPeriod)
		h.Timeout = orDefault(p.TimeoutSeconds, probeDefaultTimeout)
		h.FailureThreshold = countOr(p.FailureThreshold, probeDefaultFailures)
		h.SuccessThreshold = countOr(p.SuccessThreshold, probeDefaultSuccesses)
		source := fmt.Sprintf("the readinessProbe of container %s", pod.Spec.Containers[app].Name)
		if p.HTTPGet != nil {
			h.Type, h.Path, h.Scheme = sidecar.HealthHTTP, cmp.Or(p.HTTPGet.Path, "/"), string(p.HTTPGet.Scheme)
			probePort, portSource = &p.HTTPGet.Port, source
		} else if p.TCPSocket != nil {
			probePort, portSource = &p.TCPSocket.Port, source
		} else { // gRPC: the registrar checks that the port accepts connections
			grpcPort := intstr.FromInt32(p.GRPC.Port)
			probePort, portSource = &grpcPort, source
		}
	}

	o := &cfg.Overrides
	if o.HealthPort != nil {
		probePort, portSource = o.HealthPort, "annotation "+v1alpha1.AnnotationHealthPort
	}
	if probePort != nil {
		n, err := resolvePort(pod, *probePort, portSource)
		if err != nil {
			return sidecar.HealthConfig{}, err
		}
		h.Port = int(n)
	}
	if o.HealthType != "" {
		h.Type = strings.ToLower(string(o.HealthType))
	} else if o.HealthPath != "" {
		h.Type = sidecar.HealthHTTP
	}
	h.Path = cmp.Or(o.HealthPath, h.Path)
	h.Scheme = strings.ToLower(cmp.Or(o.HealthScheme, h.Scheme, "HTTP"))
	if h.Type != sidecar.HealthHTTP {
		h.Path, h.Scheme = "", "" // a TCP check has neither
	}
	if h.Type == sidecar.HealthHTTP && h.Path == "" {
		return sidecar.HealthConfig{}, fmt.Errorf("annotation %s: invalid value %q: an HTTP health check needs a path; set %s too",
			v1alpha1.AnnotationHealthType, o.HealthType, v1alpha1.AnnotationHealthPath)
	}
	return h, nil
}

func registrarContainer(image string, listenPort int32, env []corev1.EnvVar, mounts []corev1.VolumeMount, res corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{
		Name:         v1alpha1.RegistrarContainerName,
		Image:        image,
		Ports:        []corev1.ContainerPort{{Name: registrarPortName, ContainerPort: listenPort, Protocol: corev1.ProtocolTCP}},
		Env:          env,
		VolumeMounts: mounts,
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
// and the drain helper's installer run with it. It fixes no user or group:
// the image runs as its own numeric non-root user (65532), which
// runAsNonRoot checks, and OpenShift's restricted SCCs, which refuse a
// fixed UID outside the namespace's range, assign one of their own.
func restrictedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
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

// orDefault is n seconds, or def when n is unset (0).
func orDefault(n int32, def time.Duration) time.Duration {
	if n > 0 {
		return time.Duration(n) * time.Second
	}
	return def
}

// countOr is n, or def when n is unset (0).
func countOr(n int32, def int) int {
	if n > 0 {
		return int(n)
	}
	return def
}

// protocol is the pod's annotation, else the syncer's spec.protocol, else
// TCP when the registered port's name says so (grpc, tcp or tls, alone or
// before '-', as Istio names ports) or the app container's readinessProbe
// is a gRPC one, else HTTP.
func protocol(pod *corev1.Pod, app int, port int32, cfg Config) string {
	c := pod.Spec.Containers[app]
	nonHTTP := c.ReadinessProbe != nil && c.ReadinessProbe.GRPC != nil
	for _, cp := range c.Ports {
		nonHTTP = nonHTTP || (cp.ContainerPort == port && v1alpha1.NonHTTPPortName(cp.Name))
	}
	p := v1alpha1.EffectiveProtocol(nonHTTP, cfg.Overrides.Protocol, cfg.Syncer.Spec.Protocol)
	return sidecar.ProtocolFor(p == v1alpha1.ProtocolTCP)
}

// resolveManagement says where the app's actuator answers: the pod's
// annotations, else the syncer's spec.management, else the HTTP health
// check's port, scheme and (when it is the actuator's health) base path,
// else the registered port under /actuator.
func resolveManagement(pod *corev1.Pod, s sidecar.Config, cfg Config) (sidecar.ManagementConfig, error) {
	m := s.Management
	if h := s.Health; h.Type == sidecar.HealthHTTP {
		m.Port, m.Scheme = h.Port, h.Scheme
		if base, ok := sidecar.ActuatorBase(h.Path); ok {
			m.BasePath = base
		}
	}
	var port *intstr.IntOrString
	source := ""
	if spec := cfg.Syncer.Spec.Management; spec != nil {
		port, source = spec.Port, fmt.Sprintf("spec.management.port of EurekaSyncer %s", cfg.Syncer.Name)
		m.BasePath = cmp.Or(spec.BasePath, m.BasePath)
	}
	if o := &cfg.Overrides; o.ManagementPort != nil {
		port, source = o.ManagementPort, "annotation "+v1alpha1.AnnotationManagementPort
	}
	m.BasePath = cmp.Or(cfg.Overrides.ManagementPath, m.BasePath)
	if port != nil {
		n, err := resolvePort(pod, *port, source)
		if err != nil {
			return sidecar.ManagementConfig{}, err
		}
		switch int(n) {
		case m.Port: // the health check's: its scheme stands
		case s.SecurePort:
			m.Port, m.Scheme = int(n), "https"
		default:
			m.Port, m.Scheme = int(n), "http"
		}
	}
	return m, nil
}
