package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/internal/builders"
)

// allowing is testDefaults with the manager's allowlists set to images and
// hosts.
func allowing(t *testing.T, images, hosts []string) Defaults {
	t.Helper()
	d := testDefaults
	var err error
	if d.Allowed.RegistrarImages, err = allowlist.ParseImages(images); err != nil {
		t.Fatal(err)
	}
	if d.Allowed.EurekaHosts, err = allowlist.ParseHosts(hosts); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInject_DeniesASyncerWhoseRegistrarImageIsNotAllowed(t *testing.T) {
	s := syncer("orders", time.Hour, builders.RegistrarImage("attacker.example/miner:1"))
	r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, allowing(t, []string{"registry.example.com/eurekube/*"}, nil))
	if r.Inject || r.Reason != ReasonRegistrarImageNotAllowed || len(r.Patch) > 0 {
		t.Fatalf("inject %v, reason %s, %d patch operations: want a denial with reason %s and no patch", r.Inject, r.Reason, len(r.Patch), ReasonRegistrarImageNotAllowed)
	}
	for _, want := range []string{"EurekaSyncer orders", "spec.sidecar.image", `"attacker.example/miner:1"`, "--allowed-registrar-image", "manager.allowedRegistrarImages"} {
		if !strings.Contains(r.Denied, want) {
			t.Errorf("the denial does not name %s: %s", want, r.Denied)
		}
	}
}

func TestInject_DeniesASyncerNamingAEurekaHostNotAllowedWithoutShowingTheURL(t *testing.T) {
	s := syncer("orders", time.Hour, builders.EurekaURLs("http://eureka:8761/eureka", "http://eureka:s3cret@attacker.example:8761/eureka"))
	r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, allowing(t, nil, []string{"*.eureka.svc"}))
	if r.Inject || r.Reason != ReasonEurekaHostNotAllowed || len(r.Patch) > 0 {
		t.Fatalf("inject %v, reason %s, %d patch operations: want a denial with reason %s and no patch", r.Inject, r.Reason, len(r.Patch), ReasonEurekaHostNotAllowed)
	}
	for _, want := range []string{"EurekaSyncer orders", "spec.eureka.serviceURLs[1]", "attacker.example:8761", "--allowed-eureka-host", "manager.allowedEurekaHosts"} {
		if !strings.Contains(r.Denied, want) {
			t.Errorf("the denial does not name %s: %s", want, r.Denied)
		}
	}
	if strings.Contains(r.Denied, "serviceURLs[0]") || strings.Contains(r.Denied, "s3cret") {
		t.Errorf("the denial names the manager's own server, or shows the password: %s", r.Denied)
	}
}

func TestInject_DenialNamesEveryValueNotAllowed(t *testing.T) {
	s := syncer("orders", time.Hour, builders.RegistrarImage("attacker.example/miner:1"), builders.EurekaURLs("http://a.example:1/eureka", "https://b.example/eureka"))
	r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
	for _, want := range []string{"spec.sidecar.image", "serviceURLs[0] names host a.example:1", "serviceURLs[1] names host b.example:443"} {
		if !strings.Contains(r.Denied, want) {
			t.Errorf("the denial does not name %s: %s", want, r.Denied)
		}
	}
	if r.Reason != ReasonRegistrarImageNotAllowed {
		t.Errorf("reason %s, want the first refusal's, %s", r.Reason, ReasonRegistrarImageNotAllowed)
	}
}

func TestInject_AdmitsTheManagersOwnImageAndServersAndWhatTheAllowlistsAllow(t *testing.T) {
	defaults := allowing(t, []string{"registry.example.com/eurekube/registrar:*"}, []string{"*.eureka.svc:8761", "10.0.0.7"})
	for _, s := range []v1alpha1.EurekaSyncer{
		syncer("orders", time.Hour),
		syncer("orders", time.Hour, builders.RegistrarImage(testDefaults.RegistrarImage), builders.EurekaURLs(testDefaults.EurekaURLs...)),
		syncer("orders", time.Hour, builders.RegistrarImage("registry.example.com/eurekube/registrar:v2")),
		syncer("orders", time.Hour, builders.EurekaURLs("http://eureka-0.eureka.eureka.svc:8761/eureka", "http://10.0.0.7:9000/eureka")),
	} {
		if r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, defaults); !r.Inject {
			t.Errorf("image %q, URLs %q: %s %s", s.Spec.Sidecar.Image, s.Spec.Eureka.ServiceURLs, r.Reason, r.Denied)
		}
	}
}

// The manager's own servers are allowed by host and port, not by host
// alone: a syncer cannot reach another port of the same machine.
func TestCheckAllowed_TheManagersOwnServersAreAllowedByHostAndPort(t *testing.T) {
	s := syncer("orders", time.Hour, builders.EurekaURLs("http://eureka:22/eureka"))
	err := testDefaults.CheckAllowed(&s)
	if err == nil || !strings.Contains(err.Error(), "names host eureka:22") {
		t.Fatalf("CheckAllowed = %v, want a refusal of eureka:22", err)
	}
}
