package selfmanaged_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/cmd/manager/app"
	"github.com/eurekube/eurekube/cmd/manager/app/selfmanaged"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestSelfManaged_EveryReplicaServesTheLeadersCertificateTrustedByTheCABundle(t *testing.T) {
	e := newEnv(t)
	first := e.start(app.CertificateLifetimes{})
	secret := e.waitForCertificates()
	second := e.start(app.CertificateLifetimes{})
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
			if ev.Regarding.Kind == "Secret" && ev.Regarding.Name == app.DefaultCertificateSecret && ev.Reason == selfmanaged.ReasonServingIssued {
				return nil
			}
		}
		return fmt.Errorf("%d Events, none with reason %s on the Secret", len(list.Items), selfmanaged.ReasonServingIssued)
	})
}

func TestSelfManaged_RestoresACABundleSomeoneReset(t *testing.T) {
	e := newEnv(t)
	e.start(app.CertificateLifetimes{})
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

func TestSelfManaged_RotatesTheServingCertificateWithoutARestart(t *testing.T) {
	e := newEnv(t)
	// Renewed at 8 s, 4 s before it expires: slack for a busy machine.
	r := e.start(app.CertificateLifetimes{Serving: 12 * time.Second})
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
	r := e.start(app.CertificateLifetimes{CA: 24 * time.Second, TrustDelay: time.Second})
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
