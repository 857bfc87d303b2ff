package harness_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/tests/harness"
)

// issueTimeout is generous for a busy 2-core machine; cert-manager issues
// the chain and injects the CA within seconds on an idle one.
const issueTimeout = 3 * time.Minute

// TestCertManager_IssuesTheWebhookCertificateAndInjectsItsCA applies the
// project's own cert-manager objects and webhook configuration, as a user's
// kubectl apply would, to a real API server with cert-manager's real
// controllers and cainjector.
func TestCertManager_IssuesTheWebhookCertificateAndInjectsItsCA(t *testing.T) {
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	cm := harness.CertManagerT(t, cp, harness.CertManagerOptions{LogPath: filepath.Join(t.TempDir(), "cert-manager.log")})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cert-manager log:\n%s", cm.LogTail())
		}
	})

	objs := applyManifests(t, cp, "manifests/manager/namespace.yaml", "manifests/certmanager", "manifests/webhook")
	serving := findObject(t, objs, "Certificate", "eurekube-serving-cert")
	svc := findObject(t, objs, "Service", "eurekube-webhook")
	mwc := findObject(t, objs, "MutatingWebhookConfiguration", "eurekube")
	if got, want := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"], serving.GetNamespace()+"/"+serving.GetName(); got != want {
		t.Fatalf("the webhook configuration injects the CA of %q, want the serving Certificate %s", got, want)
	}
	secretName, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	// The name the API server calls the webhook by (clientConfig.service).
	serviceHost := svc.GetName() + "." + svc.GetNamespace() + ".svc"
	if !slices.Contains(dnsNames, serviceHost) {
		t.Fatalf("the serving Certificate's dnsNames %v lack %s", dnsNames, serviceHost)
	}

	ctx := context.Background()
	harness.Eventually(t, issueTimeout, "Certificate "+serving.GetName()+" Ready", func() error {
		return certificateReady(ctx, cp, serving.GetNamespace(), serving.GetName())
	})

	var secret corev1.Secret
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: serving.GetNamespace(), Name: secretName}, &secret); err != nil {
		t.Fatalf("the serving Secret: %v", err)
	}
	leaf := parseCertificate(t, secret.Data[corev1.TLSCertKey])
	for _, name := range dnsNames {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("the issued certificate is not valid for %s: %v", name, err)
		}
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("the issued certificate lacks server auth usage: %v", leaf.ExtKeyUsage)
	}
	if leaf.IsCA {
		t.Error("the serving certificate is a CA")
	}

	var caBundle []byte
	harness.Eventually(t, issueTimeout, "cainjector fills the webhook's caBundle", func() error {
		var got admissionregistrationv1.MutatingWebhookConfiguration
		if err := cp.Client.Get(ctx, types.NamespacedName{Name: mwc.GetName()}, &got); err != nil {
			return err
		}
		for _, w := range got.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return fmt.Errorf("webhook %s has no caBundle yet", w.Name)
			}
		}
		caBundle = got.Webhooks[0].ClientConfig.CABundle
		return nil
	})
	if !bytes.Equal(caBundle, secret.Data["ca.crt"]) {
		t.Errorf("caBundle is not the CA of the serving Secret (ca.crt):\n%s\nwant\n%s", caBundle, secret.Data["ca.crt"])
	}
	if ca := parseCertificate(t, caBundle); !ca.IsCA || ca.Subject.CommonName != "eurekube-webhook-ca" {
		t.Errorf("caBundle holds %q (CA %t), want the long-lived eurekube-webhook-ca", ca.Subject.CommonName, ca.IsCA)
	}

	// What the API server does when it calls the webhook: a TLS handshake
	// with the Service's name, trusting only the injected caBundle, against a
	// server holding the issued key pair.
	if err := handshake(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], caBundle, serviceHost); err != nil {
		t.Errorf("a client trusting the injected caBundle rejects the served certificate: %v", err)
	}

	if err := cm.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if last := lastLogLine(t, cm.LogPath()); last["level"] != "info" || last["msg"] != "cert-manager stopped" {
		t.Errorf("last log line after SIGTERM = %v, want an info line saying cert-manager stopped", last)
	}
}

// applyManifests renders each path (a file, or a kustomization with kubectl
// kustomize) and applies it server-side with the bundled kubectl, as an
// administrator would; it returns the objects applied.
func applyManifests(t *testing.T, cp *harness.ControlPlane, paths ...string) []*unstructured.Unstructured {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := cp.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	var all []*unstructured.Unstructured
	for _, p := range paths {
		p = filepath.Join(root, p)
		var raw []byte
		if fi, err := os.Stat(p); err != nil {
			t.Fatal(err)
		} else if fi.IsDir() {
			raw = runCommand(t, exec.Command(kubectl, "kustomize", p))
		} else if raw, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		objs, err := harness.DecodeObjects(raw)
		if err != nil {
			t.Fatalf("decode %s: %v", p, err)
		}
		all = append(all, objs...)
		cmd := exec.Command(kubectl, "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "-f", "-")
		cmd.Stdin = bytes.NewReader(raw)
		runCommand(t, cmd)
	}
	return all
}

func runCommand(t *testing.T, cmd *exec.Cmd) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return out
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("the manifests have no %s %s", kind, name)
	return nil
}

func certificateReady(ctx context.Context, cp *harness.ControlPlane, namespace, name string) error {
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cert); err != nil {
		return err
	}
	conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		if c["type"] == "Ready" {
			if c["status"] == "True" {
				return nil
			}
			return fmt.Errorf("Ready=%v: %v: %v", c["status"], c["reason"], c["message"])
		}
	}
	return errors.New("no Ready condition yet")
}

func parseCertificate(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", pemData)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake serves certPEM/keyPEM on a loopback listener and connects to it
// as serverName, trusting only caBundle.
func handshake(certPEM, keyPEM, caBundle []byte, serverName string) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the Secret's key pair: %w", err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return errors.New("caBundle holds no PEM certificate")
	}
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return c.Close()
}

func lastLogLine(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("the log's last line is not JSON: %v\n%s", err, lines[len(lines)-1])
	}
	return last
}
