package webhook

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/sidecar"
)

// Every registrar of a pod, as the kubelet will run it. A container runs
// the registrar when it is named eurekube-registrar or runs a registrar
// image (the manager's, or one its allowlist allows, compared by
// repository whatever the tag or digest), in spec.containers,
// spec.initContainers (a native sidecar or a plain init container) or
// spec.ephemeralContainers alike. Its settings are read as the kubelet
// gives them: env in order, a later variable of the same name replacing
// an earlier one, $(VAR) expanded as Kubernetes expands it. What decides
// the instance (the app, the port, the Eureka servers, the markers) must
// be a value the webhook can read, and the pod's identity must be
// Eurekube's own downward-API fields, so the instance id is always the
// pod's own; a registrar that fails either is denied, naming the
// container, the variable and why. Exactly what Eurekube writes passes
// (closure): the injected registrar and the drain helper's installer.

// registrar is one container of a pod that registers in Eureka.
type registrar struct {
	// Container is its name; Field, where it is in the pod
	// (spec.initContainers[0]).
	Container, Field string
	// Settings are what the registrar reads, the pod's identity standing
	// in as placeholders (sidecar.ParseInjected); shared, read only.
	Settings sidecar.Config
}

// registrarError says why a container that runs the registrar is denied.
type registrarError struct {
	Container, Field, Image string
	// Variable is the setting at fault ("" for the container as a whole).
	Variable string
	Why      string
}

func (e *registrarError) Error() string {
	what := fmt.Sprintf("container %s (%s) runs the Eureka registrar (image %s)", e.Container, e.Field, e.Image)
	if e.Variable != "" {
		what += ": " + e.Variable
	}
	return what + ": " + e.Why +
		"; a registrar's settings must be values the webhook reads at admission and its identity the pod's own: let an EurekaSyncer inject the registrar instead of writing it by hand"
}

// identityFields are the downward-API fields the registrar's identity
// comes from, as registrarEnv writes them; the instance id is built of the
// first three.
var identityFields = map[string]string{
	sidecar.EnvPodName:      "metadata.name",
	sidecar.EnvPodNamespace: "metadata.namespace",
	sidecar.EnvPodUID:       "metadata.uid",
	sidecar.EnvPodIP:        "status.podIP",
	sidecar.EnvNodeName:     "spec.nodeName",
}

// credentialVariables may come from a Secret (secretKeyRef), as pods
// injected before the credentials became files have them: credentials
// decide no instance.
var credentialVariables = []string{sidecar.EnvEurekaUsername, sidecar.EnvEurekaPassword}

// registrarImages recognises the images that run the registrar.
type registrarImages struct {
	// repositories are normalised repositories (imageRepository);
	// prefixes, normalised repository prefixes ending in '/'.
	repositories []string
	prefixes     []string
}

// newRegistrarImages recognises d's registrar image and the allowlist's
// images. An allowlist of "*" allows every image and says nothing of which
// run the registrar: only the other patterns count.
func newRegistrarImages(d Defaults) registrarImages {
	var ri registrarImages
	if d.RegistrarImage != "" {
		ri.repositories = append(ri.repositories, imageRepository(d.RegistrarImage))
	}
	for _, p := range d.Allowed.RegistrarImages.Patterns() {
		prefix, wild := strings.CutSuffix(p, "*")
		switch {
		case p == "*":
		case !wild:
			ri.repositories = append(ri.repositories, imageRepository(p))
		case strings.HasSuffix(prefix, "/"):
			ri.prefixes = append(ri.prefixes, strings.TrimSuffix(imageRepository(prefix+"x"), "x"))
		default: // repo: or repo@
			ri.repositories = append(ri.repositories, imageRepository(prefix[:len(prefix)-1]))
		}
	}
	return ri
}

// runs is true when image is a registrar image: its repository is one
// the manager names. An allowlist prefix (registry.example.com/team/*)
// may cover the apps' images too, so an image only under a prefix runs
// the registrar when the container sets a registrar variable (env).
func (ri registrarImages) runs(image string, env []corev1.EnvVar) bool {
	if image == "" || len(ri.repositories) == 0 && len(ri.prefixes) == 0 {
		return false
	}
	repo := imageRepository(image)
	if slices.Contains(ri.repositories, repo) {
		return true
	}
	for _, p := range ri.prefixes {
		if strings.HasPrefix(repo, p) {
			return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "EUREKUBE_") })
		}
	}
	return false
}

// imageRepository is image's repository as a container runtime pulls it:
// without tag or digest, with Docker Hub's implied domain and library/
// spelled out, the domain lower-cased. eurekube/registrar:v1,
// docker.io/eurekube/registrar@sha256:… and
// index.docker.io/eurekube/registrar are one repository.
func imageRepository(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	domain, rest, found := strings.Cut(name, "/")
	if !found || !strings.ContainsAny(domain, ".:") && domain != "localhost" && strings.ToLower(domain) == domain {
		domain, rest = "docker.io", name
	}
	domain = strings.ToLower(domain)
	if domain == "index.docker.io" || domain == "registry-1.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return domain + "/" + rest
}

// podContainer is what registrars reads of any kind of container.
type podContainer struct {
	// list and index say where it is in the pod (field).
	list                string
	index               int
	name, image         string
	command, args       []string
	env                 []corev1.EnvVar
	envFrom             []corev1.EnvFromSource
	restartPolicyAlways bool
	initContainer       bool
}

// containersOf lists every container of pod: init, regular, ephemeral.
func containersOf(pod *corev1.Pod) []podContainer {
	out := make([]podContainer, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+len(pod.Spec.EphemeralContainers))
	for i, c := range pod.Spec.InitContainers {
		out = append(out, podContainer{list: "spec.initContainers", index: i, name: c.Name, image: c.Image,
			command: c.Command, args: c.Args, env: c.Env, envFrom: c.EnvFrom, initContainer: true,
			restartPolicyAlways: c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways})
	}
	for i, c := range pod.Spec.Containers {
		out = append(out, podContainer{list: "spec.containers", index: i, name: c.Name, image: c.Image,
			command: c.Command, args: c.Args, env: c.Env, envFrom: c.EnvFrom})
	}
	for i, c := range pod.Spec.EphemeralContainers {
		out = append(out, podContainer{list: "spec.ephemeralContainers", index: i, name: c.Name, image: c.Image,
			command: c.Command, args: c.Args, env: c.Env, envFrom: c.EnvFrom})
	}
	return out
}

// field is where the container is in the pod (spec.initContainers[0]),
// written only for the registrars: most containers of a pod are the
// app's, skipped without it.
func (c podContainer) field() string {
	return c.list + "[" + strconv.Itoa(c.index) + "]"
}

// installsTheDrain is true for the drain helper's installer as
// drainContainers writes it: the registrar image told to copy itself
// (sidecar.InstallDrainCommand), which registers nothing.
func (c podContainer) installsTheDrain() bool {
	return c.initContainer && !c.restartPolicyAlways && len(c.command) == 0 &&
		len(c.args) == 2 && c.args[0] == sidecar.InstallDrainCommand && !strings.Contains(c.args[1], "$")
}

// registrars reads every container of pod that runs the registrar; the
// first that cannot be read as the kubelet will run it is the error (a
// *registrarError).
func (ri registrarImages) registrars(pod *corev1.Pod) ([]registrar, error) {
	var out []registrar
	for _, c := range containersOf(pod) {
		if c.name != v1alpha1.RegistrarContainerName && !ri.runs(c.image, c.env) {
			continue
		}
		if c.installsTheDrain() && c.name != v1alpha1.RegistrarContainerName {
			continue
		}
		r, err := readRegistrar(c)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readRegistrar reads one registrar container's settings as the kubelet
// will give them.
func readRegistrar(c podContainer) (registrar, error) {
	field := c.field()
	fail := func(variable, why string) error {
		return &registrarError{Container: c.name, Field: field, Image: c.image, Variable: variable, Why: why}
	}
	switch {
	case len(c.command) > 0 || len(c.args) > 0:
		return registrar{}, fail("command and args", fmt.Sprintf("%q: the registrar takes a flag for each setting, which overrides its environment, and Eurekube's registrar has neither command nor args; remove them",
			append(slices.Clone(c.command), c.args...)))
	case len(c.envFrom) > 0:
		return registrar{}, fail("envFrom", fmt.Sprintf("%s: its keys are known only when the kubelet starts the container, and any of them may be a registrar setting; set each variable in env instead",
			envFromSource(c.envFrom[0])))
	}
	v := readEnvOnce(c.env)
	if !v.ok {
		return registrar{}, fail(v.variable, v.why)
	}
	return registrar{Container: c.name, Field: field, Settings: v.settings}, nil
}

// envVerdict is what readEnv finds in a registrar's environment: the
// settings the registrar reads (read only: shared by every container of
// that environment), or the variable at fault and why.
type envVerdict struct {
	ok            bool
	settings      sidecar.Config
	variable, why string
}

// readEnv reads a registrar's settings from its container's env as the
// kubelet will give them. Its verdict depends on env alone (readEnvOnce).
func readEnv(containerEnv []corev1.EnvVar) envVerdict {
	fail := func(variable, format string, args ...any) envVerdict {
		return envVerdict{variable: variable, why: fmt.Sprintf(format, args...)}
	}
	env := kubeletEnv(containerEnv)
	literal := make([]sidecar.EnvVar, 0, len(env))
	for _, name := range sidecar.EnvNames() {
		v, set := env[name]
		if path, identity := identityFields[name]; identity {
			switch {
			case !set && name == sidecar.EnvNodeName:
			case !set:
				return fail(name, "not set; the registrar's identity is the pod's own, from the downward API (fieldRef %s)", path)
			case v.from == nil || v.from.FieldRef == nil || v.from.FieldRef.FieldPath != path ||
				v.from.FieldRef.APIVersion != "" && v.from.FieldRef.APIVersion != "v1":
				return fail(name, "%s; the registrar's identity must be the pod's own, fieldRef %s, so that its instance id is its own and no other pod's", v.describe(), path)
			}
			continue
		}
		switch {
		case !set:
			continue
		case v.from != nil && v.from.SecretKeyRef != nil && slices.Contains(credentialVariables, name):
			continue
		case v.from != nil || v.unknown != "":
			return fail(name, "%s; it decides what the registrar registers, so it must be a literal value", v.describe())
		}
		literal = append(literal, sidecar.EnvVar{Name: name, Value: v.value})
	}
	v := parseSettings(literal)
	if v.err != nil {
		return fail("", "the registrar would refuse its settings: %v", v.err)
	}
	return envVerdict{ok: true, settings: v.settings}
}

// registrarEnvs keeps readEnv's verdict on each registrar environment, up
// to maxAcceptedSettings of them: the webhook reads back the registrar of
// every pod it injects (checkRegistrars), and the pods of one syncer and
// workload carry one registrar environment, so it is read once, not once
// per pod.
var registrarEnvs = newVerdictCache[envVerdict]()

// readEnvOnce is readEnv(env), read once per environment. An environment
// with a valueFrom other than a fieldRef (a Secret's credentials, a
// ConfigMap's value) is read every time: its key would have to hold every
// selector the kubelet reads, and Eurekube writes none.
func readEnvOnce(env []corev1.EnvVar) envVerdict {
	var buf [envKeyBuffer]byte
	key, ok := appendContainerEnvKey(buf[:0], env)
	if !ok {
		return readEnv(env)
	}
	return registrarEnvs.once(key, func() envVerdict { return readEnv(env) })
}

// appendContainerEnvKey appends env as one key to b, one key per
// environment as readEnv reads it: every name, then a literal value
// ('v') or a fieldRef's API version and path ('f'), each written after
// its length, in env's order. ok is false for an environment with any
// other valueFrom.
func appendContainerEnvKey(b []byte, env []corev1.EnvVar) (key []byte, ok bool) {
	for _, e := range env {
		b = appendLengthPrefixed(b, e.Name)
		switch from := e.ValueFrom; {
		// A value, even with a valueFrom beside it, is what kubeletEnv
		// reads; no value and no valueFrom is the empty value.
		case e.Value != "" || from == nil:
			b = appendLengthPrefixed(append(b, 'v'), e.Value)
		case from.FieldRef != nil && *from == (corev1.EnvVarSource{FieldRef: from.FieldRef}):
			b = appendLengthPrefixed(append(b, 'f'), from.FieldRef.APIVersion)
			b = appendLengthPrefixed(b, from.FieldRef.FieldPath)
		default:
			return nil, false
		}
	}
	return b, true
}

// envValue is a variable of a container as the kubelet gives it.
type envValue struct {
	// value is the literal value, $(VAR) expanded.
	value string
	// from is its valueFrom: read by the kubelet, not by the webhook.
	from *corev1.EnvVarSource
	// unknown says why the value cannot be known at admission (a $(VAR)
	// that refers to such a variable, or to one not defined before it).
	unknown string
}

// describe says where the variable's value comes from, for a message.
func (v envValue) describe() string {
	switch {
	case v.unknown != "":
		return v.unknown
	case v.from == nil:
		return fmt.Sprintf("the literal value %q", v.value)
	case v.from.FieldRef != nil:
		return fmt.Sprintf("valueFrom fieldRef %s", v.from.FieldRef.FieldPath)
	case v.from.ResourceFieldRef != nil:
		return fmt.Sprintf("valueFrom resourceFieldRef %s", v.from.ResourceFieldRef.Resource)
	case v.from.ConfigMapKeyRef != nil:
		return fmt.Sprintf("valueFrom configMapKeyRef %s/%s, which the webhook does not read", v.from.ConfigMapKeyRef.Name, v.from.ConfigMapKeyRef.Key)
	case v.from.SecretKeyRef != nil:
		return fmt.Sprintf("valueFrom secretKeyRef %s/%s, which the webhook does not read", v.from.SecretKeyRef.Name, v.from.SecretKeyRef.Key)
	}
	return "a valueFrom the webhook does not read"
}

// kubeletEnv is the container's environment as the kubelet builds it
// (envFrom aside, which registrars refuses): in order, each value $(VAR)
// expanded against the variables defined before it, a later variable of a
// name replacing an earlier one.
func kubeletEnv(env []corev1.EnvVar) map[string]envValue {
	out := make(map[string]envValue, len(env))
	for _, e := range env {
		switch {
		case e.Value != "":
			var unknown string
			value := expand(e.Value, func(name string) (string, bool) {
				v, ok := out[name]
				if ok && v.from == nil && v.unknown == "" {
					return v.value, true
				}
				if unknown == "" {
					if ok {
						unknown = fmt.Sprintf("its value %q refers to $(%s), which is %s", e.Value, name, v.describe())
					} else {
						unknown = fmt.Sprintf("its value %q refers to $(%s), which is not defined before it: the kubelet may fill it from a Service's variables", e.Value, name)
					}
				}
				return v.value, ok
			})
			out[e.Name] = envValue{value: value, unknown: unknown}
		case e.ValueFrom != nil:
			out[e.Name] = envValue{from: e.ValueFrom}
		default:
			out[e.Name] = envValue{}
		}
	}
	return out
}

// envFromSource names an envFrom source, for a message.
func envFromSource(s corev1.EnvFromSource) string {
	switch {
	case s.ConfigMapRef != nil:
		return "ConfigMap " + s.ConfigMapRef.Name
	case s.SecretRef != nil:
		return "Secret " + s.SecretRef.Name
	}
	return "a source"
}

// checkRegistrarHosts refuses a registrar that would call a Eureka host
// the manager does not allow, as for a syncer's spec.eureka.serviceURLs.
func (d Defaults) checkRegistrarHosts(r registrar) error {
	own := ownHosts(d.EurekaURLs)
	for _, u := range r.Settings.EurekaURLs {
		if !own.AllowsURL(u) && !d.Allowed.EurekaHosts.AllowsURL(u) {
			return fmt.Errorf("container %s (%s): %s names host %s, not an allowed Eureka host (allow it with the manager's --%s, Helm value %s)",
				r.Container, r.Field, sidecar.EnvEurekaURLs, allowlist.HostOf(u), allowlist.HostsFlag, allowlist.HostsChartValue)
		}
	}
	return nil
}
