package cluster_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// Installed as users install it: cert-manager issued the webhook's
// certificate and cainjector put its CA into the webhook configuration, the
// manager runs as its Deployment's pods from its image, the API server
// calls the webhook through its Service, and a pod of an opted-in namespace
// comes up injected and UP in Eureka.
func TestInstall_FromManifestsDefault(t *testing.T) {
	story(t, 15*time.Second)
	ctx := context.Background()
	var secret corev1.Secret
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: "eurekube-webhook-tls"}, &secret); err != nil {
		t.Fatalf("cert-manager's serving certificate Secret: %v", err)
	}
	if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
		t.Fatalf("Secret eurekube-webhook-tls holds %d bytes of tls.crt and %d of ca.crt", len(secret.Data["tls.crt"]), len(secret.Data["ca.crt"]))
	}
	// What the API server checks when it calls the webhook by its Service
	// name is exercised by every admission below; these are what it does
	// not check but an operator would expect of the issued pair.
	leaf, err := parsePEMCertificate(secret.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatalf("tls.crt: %v", err)
	}
	for _, name := range []string{cluster.WebhookService + "." + cluster.ManagerNamespace + ".svc", cluster.WebhookService + "." + cluster.ManagerNamespace + ".svc.cluster.local"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("the serving certificate is not valid for %s: %v", name, err)
		}
	}
	if leaf.IsCA || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("the serving certificate is a CA (%t) or lacks server auth (%v)", leaf.IsCA, leaf.ExtKeyUsage)
	}
	if ca, err := parsePEMCertificate(secret.Data["ca.crt"]); err != nil || !ca.IsCA || ca.Subject.CommonName != "eurekube-webhook-ca" {
		t.Errorf("ca.crt is not the long-lived eurekube-webhook-ca CA: %v", err)
	}

	var wh admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Name: cluster.WebhookConfig}, &wh); err != nil {
		t.Fatal(err)
	}
	for _, w := range wh.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
			t.Errorf("webhook %s caBundle is not the CA cert-manager issued the serving certificate with", w.Name)
		}
		if w.ClientConfig.Service == nil || w.ClientConfig.URL != nil {
			t.Errorf("webhook %s is not reached through a Service: %+v", w.Name, w.ClientConfig)
		}
	}
	// The manager's pods alone: the gateway's run the same image.
	managers, err := c.ManagerPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range managers {
		if p.Spec.Containers[0].Image == c.Node.Image("manager") && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			ready++
		}
	}
	if ready != 2 {
		t.Fatalf("%d manager pods ready from %s, want the Deployment's 2", ready, c.Node.Image("manager"))
	}

	app := cluster.App{Namespace: "install", Name: "catalog", Replicas: 1, DrainSeconds: ptr.To[int32](2)}
	record(t).Watch(app.Namespace)
	if err := c.Deploy(ctx, app, nil); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*time.Minute, "the pod injected, ready and UP in Eureka", func() error {
		v, err := c.Look(ctx, app)
		if err != nil {
			return err
		}
		for _, p := range v.Pods {
			if !v1alpha1.MarkedInjected(&p) {
				return fmt.Errorf("pod %s not injected: %v", p.Name, p.Annotations)
			}
		}
		return v.Settled(1)
	})
	harness.Eventually(t, time.Minute, "kubectl get esync reads READY 1/1, Synced", func() error {
		var s v1alpha1.EurekaSyncer
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, &s); err != nil {
			return err
		}
		if s.Status.Ready != "1/1" || !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("READY %q, conditions %v", s.Status.Ready, s.Status.Conditions)
		}
		return nil
	})
}

func parsePEMCertificate(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}
