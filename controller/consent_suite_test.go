package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// A syncer names a Secret holding the Eureka server's password, but the
// Secret does not carry the consent label: the manager uses nothing of it,
// and the syncer's EurekaReachable condition names the Secret, the label
// and the kubectl command that adds it. Once labelled, the manager reads
// the server with the Secret's credentials, without a change of the
// syncer.
func TestConsent_ASecretIsUsedOnlyOnceLabelled(t *testing.T) {
	needsServers(t)
	ctx := context.Background()
	secure := harness.EurekaT(t, harness.EurekaOptions{Auth: &harness.EurekaAuth{Username: "eureka", Password: "s3cret"}})
	direct, err := eureka.New(eureka.Options{URLs: []string{secure.URL()}, Username: "eureka", Password: "s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	vm := eureka.Instance{App: "VAULT", InstanceID: "vm-1:vault:8080", HostName: "10.9.8.1", IPAddr: "10.9.8.1",
		Status: eureka.StatusUp, Port: 8080, PortEnabled: true}
	if err := direct.Register(ctx, vm); err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t)
	login := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "eureka-login", Namespace: ns},
		Data: map[string][]byte{"username": []byte("eureka"), "password": []byte("s3cret")}}
	if err := k8s.Create(ctx, login); err != nil {
		t.Fatal(err)
	}
	s := builders.Syncer(ns, "vault", builders.Port(intstr.FromInt32(8080)), builders.EurekaURLs(secure.URL()), builders.Credentials(login.Name))
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	fix := "kubectl -n " + ns + " label secret eureka-login " + v1alpha1.EurekaCredentialsLabel + "=true"
	harness.Eventually(t, patience, "SecretNotConsented naming the Secret, the label and the command",
		reachable(s, metav1.ConditionFalse, "SecretNotConsented", "Secret "+ns+"/eureka-login", "spec.eureka.credentialsSecretRef", fix))
	got, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ElsewhereInstances != 0 {
		t.Fatalf("without consent the manager read the server: elsewhereInstances %d", got.Status.ElsewhereInstances)
	}

	// What the condition says to run.
	login.Labels = map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}
	if err := k8s.Update(ctx, login); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the server read with the Secret's credentials: the VM counted", readsElsewhere(s, 1))
}
