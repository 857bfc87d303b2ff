package webhook

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func TestMutate_EveryHookKindIsComposedWithTheDrain(t *testing.T) {
	const helper = "/eurekube-drain/eurekube-drain"
	s := syncer("orders", time.Hour)
	grace := int64(45)
	for _, tc := range []struct {
		name     string
		hook     *corev1.LifecycleHandler
		execOnly bool
		want     *corev1.LifecycleHandler
		reason   v1alpha1.AdaptationReason // "" for none
	}{
		{name: "no hook", want: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 100}}},
		{name: "no hook, exec fallback", execOnly: true,
			want: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{helper, "drain", "-wait=1m40s"}}}},
		{name: "sleep", hook: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}},
			want: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 102}}, reason: v1alpha1.AdaptationPreStopComposed},
		{name: "sleep, exec fallback", hook: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}, execOnly: true,
			want:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{helper, "drain", "-wait=1m42s"}}},
			reason: v1alpha1.AdaptationPreStopComposed},
		{name: "exec", hook: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain", "--wait=20"}}},
			want:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{helper, "drain", "-wait=1m40s", "--", "/bin/drain", "--wait=20"}}},
			reason: v1alpha1.AdaptationPreStopComposed},
		{name: "httpGet on a named port", hook: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/actuator/pause", Port: intstr.FromString("http"), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Drain", Value: "yes"}}}},
			want: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{helper, "drain", "-wait=1m40s",
				"-http-scheme=HTTP", "-http-host=", "-http-port=8080", "-http-path=/actuator/pause", "-http-header=X-Drain:yes"}}},
			reason: v1alpha1.AdaptationPreStopComposed},
		{name: "httpGet on an undeclared port name", hook: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/x", Port: intstr.FromString("admin")}},
			want: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 100}}, reason: v1alpha1.AdaptationPreStopDropped},
		{name: "tcpSocket", hook: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			want: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 100}}, reason: v1alpha1.AdaptationPreStopDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := springPod()
			pod.Spec.TerminationGracePeriodSeconds = &grace
			if tc.hook != nil {
				pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: tc.hook}
			}
			defaults := testDefaults
			defaults.ExecSleepFallback = tc.execOnly
			out, adaptations, err := Mutate(pod, Config{Syncer: &s, Defaults: defaults})
			if err != nil {
				t.Fatal(err)
			}
			app := out.Spec.Containers[0]
			if got := app.Lifecycle.PreStop; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("preStop = %+v, want %+v", got, tc.want)
			}
			if got := *out.Spec.TerminationGracePeriodSeconds; got != grace+100 {
				t.Errorf("grace = %d, want the pod's %d + the 100 s drain", got, grace)
			}
			viaHelper := tc.want.Exec != nil
			if has := len(out.Spec.InitContainers) == 1 && len(app.VolumeMounts) == 1 && hasVolume(out, drainVolume); has != viaHelper {
				t.Errorf("drain helper installed = %v, want %v (init containers %d, mounts %d)", has, viaHelper, len(out.Spec.InitContainers), len(app.VolumeMounts))
			}
			if viaHelper && out.Spec.InitContainers[0].Args[0] != sidecar.InstallDrainCommand {
				t.Errorf("init container args = %q", out.Spec.InitContainers[0].Args)
			}
			var reasons []v1alpha1.AdaptationReason
			for _, a := range adaptations {
				reasons = append(reasons, a.Reason)
			}
			if want := tc.reason; (want == "" && len(reasons) != 0) || (want != "" && (len(reasons) != 1 || reasons[0] != want)) {
				t.Errorf("adaptations = %v, want %q", reasons, want)
			}
			recorded, err := v1alpha1.DecodeAdaptations(out.Annotations[v1alpha1.AdaptationsAnnotation])
			if err != nil || len(recorded) != len(adaptations) {
				t.Errorf("annotation %s = %q (%v), want the %d adaptations", v1alpha1.AdaptationsAnnotation, out.Annotations[v1alpha1.AdaptationsAnnotation], err, len(adaptations))
			}
			if got := out.Annotations[v1alpha1.DrainAnnotation]; got != "100" {
				t.Errorf("annotation %s = %q, want 100", v1alpha1.DrainAnnotation, got)
			}
		})
	}
}

// The helper's arguments are the webhook's rendering of the hook; what the
// helper parses back must be that hook.
func TestMutate_HelperArgumentsParseBackToTheHook(t *testing.T) {
	s := syncer("orders", time.Hour)
	pod := springPod()
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Scheme: corev1.URISchemeHTTPS, Host: "localhost", Path: "/pause?now=1", Port: intstr.FromInt32(8443),
		HTTPHeaders: []corev1.HTTPHeader{{Name: "Authorization", Value: "Bearer a:b"}}}}}
	out, _, err := Mutate(pod, Config{Syncer: &s, Defaults: testDefaults})
	if err != nil {
		t.Fatal(err)
	}
	cmd := out.Spec.Containers[0].Lifecycle.PreStop.Exec.Command
	d, err := sidecar.ParseDrain(cmd[2:], io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := sidecar.Drain{Wait: 100 * time.Second, HTTPGet: &sidecar.DrainHTTPGet{Scheme: "HTTPS", Host: "localhost", Port: 8443, Path: "/pause?now=1",
		Headers: []sidecar.DrainHeader{{Name: "Authorization", Value: "Bearer a:b"}}}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("parsed %+v, want %+v", d, want)
	}
}

func TestMutate_EveryContainerButTheRegistrarIsDrained(t *testing.T) {
	s := syncer("orders", time.Hour)
	pod := springPod()
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "cloud-sql-proxy", Image: "registry.example/proxy:2"})
	out, _, err := Mutate(pod, Config{Syncer: &s, Defaults: testDefaults})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range out.Spec.Containers {
		drained := c.Lifecycle != nil && c.Lifecycle.PreStop != nil
		if drained != (c.Name != v1alpha1.RegistrarContainerName) {
			t.Errorf("container %s drained = %v", c.Name, drained)
		}
	}
}

func TestMutate_DrainZeroIsRecorded(t *testing.T) {
	s := syncer("orders", time.Hour)
	zero := int32(0)
	s.Spec.Drain.PreStopSleepSeconds = &zero
	out, adaptations, err := Mutate(springPod(), Config{Syncer: &s, Defaults: testDefaults})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Containers[0].Lifecycle != nil || out.Spec.TerminationGracePeriodSeconds != nil {
		t.Errorf("drain 0 changed the app container or the grace period")
	}
	if len(adaptations) != 1 || adaptations[0].Reason != v1alpha1.AdaptationDrainDisabled || out.Annotations[v1alpha1.DrainAnnotation] != "0" {
		t.Fatalf("adaptations = %+v, drain annotation %q", adaptations, out.Annotations[v1alpha1.DrainAnnotation])
	}
}

func TestMutate_UnknownPortNameIsAnError(t *testing.T) {
	s := syncer("orders", time.Hour)
	pod := springPod()
	pod.Spec.Containers[0].Ports[0].Name = "web"
	if _, _, err := Mutate(pod, Config{Syncer: &s, Defaults: testDefaults}); err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("err = %v, want one naming the missing port http", err)
	}
}

// A syncer stored before the CRD refused credentials in its URLs: its pods
// are refused, naming the Secret to use and not the password, rather than
// given a registrar that would refuse the URL (and hold the password in the
// pod's environment).
func TestMutate_RefusesCredentialsInAStoredSyncersURLWithoutShowingThem(t *testing.T) {
	s := syncer("orders", time.Hour)
	s.Spec.Eureka.ServiceURLs = []string{"http://eureka:8761/eureka", "http://orders:s3cret@eureka:8761/eureka"}
	_, _, err := Mutate(springPod(), Config{Syncer: &s, Defaults: testDefaults})
	if err == nil {
		t.Fatal("Mutate gave the pod a registrar with a password in its Eureka URL")
	}
	for _, want := range []string{"spec.eureka.serviceURLs[1]", "EurekaSyncer orders", "orders:xxxxx@eureka", "spec.eureka.credentialsSecretRef"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("err = %v: it shows the password", err)
	}
}

func TestMutate_GoldenPods(t *testing.T) {
	orders := syncer("orders", time.Hour)
	for _, tc := range []struct {
		name string
		pod  func() *corev1.Pod
	}{
		{"spring-boot-readiness-probe", springPod},
		{"two-containers-and-init", func() *corev1.Pod {
			p := springPod()
			p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "registry.example/flyway:10"}}
			p.Spec.Containers = append([]corev1.Container{{Name: "log-shipper", Image: "registry.example/fluent-bit:3"}}, p.Spec.Containers...)
			return p
		}},
		{"prestop-exec-composed", withPreStop(&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain", "--wait=20"}}})},
		{"prestop-sleep-composed", withPreStop(&corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}})},
		{"prestop-httpget-composed", withPreStop(&corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/actuator/pause", Port: intstr.FromString("http"), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Drain", Value: "yes"}}}})},
		{"prestop-tcpsocket-dropped", withPreStop(&corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}})},
		{"second-container-with-own-exec-hook", func() *corev1.Pod {
			p := springPod()
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "cloud-sql-proxy", Image: "registry.example/proxy:2",
				Ports:     []corev1.ContainerPort{{Name: "sql", ContainerPort: 5432}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/proxy", "--drain"}}}}})
			return p
		}},
		{"job-pod-skipped", func() *corev1.Pod {
			p := springPod()
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			return p
		}},
		{"generate-name-no-name", func() *corev1.Pod {
			p := springPod()
			p.Name, p.GenerateName = "", "orders-7d9f8-"
			return p
		}},
		{"host-network", func() *corev1.Pod {
			p := springPod()
			p.Spec.HostNetwork = true
			return p
		}},
		{"eureka-credentials-and-tls", springPod},
		{"gateway-token", springPod},
		{"already-injected-unchanged", func() *corev1.Pod {
			return inject(t, springPod(), orders)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := orders
			if tc.name == "eureka-credentials-and-tls" {
				s = *orders.DeepCopy()
				s.Spec.Eureka.CredentialsSecretRef = &corev1.LocalObjectReference{Name: "eureka-login"}
				s.Spec.Eureka.TLS = &v1alpha1.EurekaTLS{CABundleRef: &v1alpha1.CABundleRef{Name: "corp-ca"},
					ClientCertificateSecretRef: &corev1.LocalObjectReference{Name: "eureka-client"}}
			}
			d := testDefaults
			if tc.name == "gateway-token" {
				d = gatewayDefaults()
			}
			r := Inject(tc.pod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, d)
			if r.Denied != "" {
				t.Fatal(r.Denied)
			}
			got, err := yaml.Marshal(r.Pod)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./webhook -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("mutated pod differs from %s (run go test ./webhook -update and review the diff):\n%s", path, got)
			}
		})
	}
}
