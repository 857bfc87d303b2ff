package selfmanaged_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/certs/selfmanaged"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestSelfManaged_EveryReplicaServesTheLeadersCertificateTrustedByTheCABundle(t *testing.T) {
	e := newEnv(t)
	first := e.start(manager.CertificateLifetimes{})
	secret := e.waitForCertificates()
	second := e.start(manager.CertificateLifetimes{})
	want := leaf(t, secret)

	for name, r := range map[string]*replica{"first replica": first, "second replica": second} {
		served, err := e.handshake(r)
		if err != nil {
			t.Fatalf("%s: a client trusting the caBundle: %v", name, err)
		}
		if !served.Equal(want) {
			t.Errorf("%s serves serial %s, want the Secret's %s", name, served.SerialNumber, want.SerialNumber)
		}
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cp.Client.Get(e.ctx, types.NamespacedName{Name: e.webhook}, &mwc); err != nil {
		t.Fatal(err)
	}
	if owners := secret.OwnerReferences; len(owners) != 1 || owners[0].Kind != "MutatingWebhookConfiguration" || owners[0].UID != mwc.UID {
		t.Errorf("the Secret's owners are %+v, want the webhook configuration %s (uid %s), whose deletion at uninstall deletes the Secret", owners, mwc.Name, mwc.UID)
	}
	if now := e.secret(); now.ResourceVersion != secret.ResourceVersion {
		t.Error("the Secret was written again after the second replica started: only the leader writes, and it had nothing to change")
	}
	if want.NotAfter.Sub(want.NotBefore) != certs.DefaultServingValidity {
		t.Errorf("serving certificate valid for %s, want %s", want.NotAfter.Sub(want.NotBefore), certs.DefaultServingValidity)
	}

	samples, err := harness.Metrics(e.ctx, "http://127.0.0.1:"+strconv.Itoa(first.metricsPort)+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := samples["eurekube_webhook_certificate_expiry_timestamp_seconds"]; got != float64(want.NotAfter.Unix()) {
		t.Errorf("eurekube_webhook_certificate_expiry_timestamp_seconds = %v, want %d", got, want.NotAfter.Unix())
	}

	harness.Eventually(t, deadline, "an Event on the Secret says the certificate was issued", func() error {
		var list eventsv1.EventList
		if err := cp.Client.List(e.ctx, &list, client.InNamespace(e.namespace)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Secret" && ev.Regarding.Name == manager.DefaultCertificateSecret && ev.Reason == selfmanaged.ReasonServingIssued {
				return nil
			}
		}
		return fmt.Errorf("%d Events, none with reason %s on the Secret", len(list.Items), selfmanaged.ReasonServingIssued)
	})
}

func TestSelfManaged_RestoresACABundleSomeoneReset(t *testing.T) {
	e := newEnv(t)
	e.start(manager.CertificateLifetimes{})
	secret := e.waitForCertificates()

	// What a helm upgrade or kubectl apply of the manifest does.
	reset := []byte(`[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]`)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e.webhook}}
	if err := cp.Client.Patch(e.ctx, mwc, client.RawPatch(types.JSONPatchType, reset)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, deadline, "the leader restores the caBundle", func() error {
		if !bytes.Equal(e.caBundle(), secret.Data[certs.CAFile]) {
			return errors.New("the caBundle is not the Secret's ca.crt")
		}
		return nil
	})
}

// A Secret issued before the configuration owned it (an older version)
// is adopted as it is: the owner added, nothing issued anew.
func TestSelfManaged_AdoptsASecretWithoutAnOwnerKeepingItsCertificates(t *testing.T) {
	e := newEnv(t)
	e.start(manager.CertificateLifetimes{})
	issued := e.waitForCertificates()
	if len(issued.OwnerReferences) != 1 {
		t.Fatalf("the Secret's owners are %+v, want the webhook configuration", issued.OwnerReferences)
	}
	orphaned := issued.DeepCopy()
	orphaned.OwnerReferences = nil
	if err := cp.Client.Update(e.ctx, orphaned); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, deadline, "the leader makes the webhook configuration the Secret's owner again", func() error {
		s := e.secret()
		if s == nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != issued.OwnerReferences[0].UID {
			return errors.New("not owned yet")
		}
		if !bytes.Equal(s.Data[certs.CAFile], issued.Data[certs.CAFile]) || !bytes.Equal(s.Data[certs.CertFile], issued.Data[certs.CertFile]) {
			t.Fatal("adopting the Secret issued new certificates")
		}
		return nil
	})
}

// Uninstalling deletes the webhook configuration while the leader still
// runs; the garbage collector then deletes the Secret it owns (not run
// here: the test deletes it). The leader must not issue a Secret nobody
// would delete; a configuration created again is a fresh start.
func TestSelfManaged_IssuesNothingWithoutItsWebhookConfigurationAndStartsOverWhenItReturns(t *testing.T) {
	e := newEnv(t)
	r := e.start(manager.CertificateLifetimes{})
	before := e.waitForCertificates()

	if err := cp.Client.Delete(e.ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e.webhook}}); err != nil {
		t.Fatal(err)
	}
	logged := func(what string) int {
		data, err := os.ReadFile(r.log)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), what)
	}
	harness.Eventually(t, deadline, "the leader logs that it issues nothing without the configuration", func() error {
		if logged("no MutatingWebhookConfiguration: issuing no certificate until it exists") == 0 {
			return errors.New("not logged yet")
		}
		return nil
	})
	const skipped = "still no MutatingWebhookConfiguration: issuing nothing"
	n := logged(skipped)
	if err := cp.Client.Delete(e.ctx, before); err != nil { // the garbage collector's part
		t.Fatal(err)
	}
	harness.Eventually(t, deadline, "the leader syncs on the Secret's deletion", func() error {
		if logged(skipped) == n {
			return errors.New("no sync since")
		}
		return nil
	})
	if s := e.secret(); s != nil {
		t.Fatalf("the leader issued Secret %s (owners %+v) with no webhook configuration to own it", s.Name, s.OwnerReferences)
	}

	again := e.webhookObject.DeepCopy()
	if err := cp.Client.Create(e.ctx, again); err != nil {
		t.Fatal(err)
	}
	after := e.waitForCertificates()
	if owners := after.OwnerReferences; len(owners) != 1 || owners[0].UID != again.UID {
		t.Errorf("the new Secret's owners are %+v, want the new configuration (uid %s)", owners, again.UID)
	}
	if bytes.Equal(after.Data[certs.CAFile], before.Data[certs.CAFile]) {
		t.Error("the new Secret holds the old CA: it was not issued anew")
	}
	harness.Eventually(t, deadline, "the replica serves the new certificate, trusted by the new caBundle", func() error {
		served, err := e.handshake(r)
		if err != nil {
			return err
		}
		if !served.Equal(leaf(t, after)) {
			return fmt.Errorf("serves serial %s, want the new Secret's", served.SerialNumber)
		}
		return nil
	})
}

func TestSelfManaged_RotatesTheServingCertificateWithoutARestart(t *testing.T) {
	e := newEnv(t)
	// Renewed at 8 s, 4 s before it expires: slack for a busy machine.
	r := e.start(manager.CertificateLifetimes{Serving: 12 * time.Second})
	first := leaf(t, e.waitForCertificates())

	// Rotated twice, every handshake trusting the caBundle succeeding.
	seen := map[string]bool{}
	harness.Eventually(t, deadline, "the webhook serves two rotated certificates", func() error {
		served, err := e.handshake(r)
		if err != nil {
			t.Fatalf("handshake after %d rotations: %v", len(seen), err)
		}
		if !served.Equal(first) {
			seen[served.SerialNumber.String()] = true
		}
		if len(seen) < 2 {
			return fmt.Errorf("%d rotated certificates served", len(seen))
		}
		return nil
	})
}

func TestSelfManaged_RotatesTheCAKeepingBothInTheCABundleDuringTheOverlap(t *testing.T) {
	e := newEnv(t)
	// The CA rotates at 16 s; the new CA signs the served certificate a
	// second later, 7 s before the old one (whose certificates never
	// outlive it) expires: slack for a busy machine.
	r := e.start(manager.CertificateLifetimes{CA: 24 * time.Second, TrustDelay: time.Second})
	firstCA := parseBundle(t, e.waitForCertificates().Data[certs.CAFile])[0]

	overlap := false
	harness.Eventually(t, deadline+10*time.Second, "the webhook serves a certificate of a new CA, and the old CA left the caBundle", func() error {
		bundle := parseBundle(t, e.caBundle())
		overlap = overlap || len(bundle) == 2
		served, err := e.handshake(r)
		if err != nil {
			t.Fatalf("handshake during the CA rotation (caBundle of %d CAs): %v", len(bundle), err)
		}
		if served.CheckSignatureFrom(firstCA) == nil {
			return errors.New("still serving a certificate of the first CA")
		}
		if len(bundle) != 1 || bundle[0].Equal(firstCA) {
			return fmt.Errorf("the caBundle holds %d CAs", len(bundle))
		}
		return nil
	})
	if !overlap {
		t.Fatal("the caBundle never held the old and the new CA together")
	}
}

func parseBundle(t *testing.T, pem []byte) []*x509.Certificate {
	t.Helper()
	b, err := certs.ParseBundle(pem)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
