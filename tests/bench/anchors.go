package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

// The anchor webhooks stand beside Eurekube's in the creates: the API
// server calls them the way it calls the manager (a URL on this machine,
// TLS with the same certificate and CA, HTTP/1.1, the webhook settings of
// manifests/), so what differs is only what answers.
const (
	// anchorLabel on a namespace picks the anchor webhook its pods go to.
	anchorLabel = "bench.eurekube.io/anchor"
	// anchorPrecomputed answers every pod with the patch Eurekube gives the
	// bench pod, prepared once: the fastest webhook producing this very
	// mutation, so the API server's cost of the bigger pod is in both arms.
	anchorPrecomputed = "precomputed"
	// anchorTwin is the precomputed anchor again, served alike on a path
	// of its own: the two make an A/A pair, whose spread in the same run
	// is what a difference between arms must exceed to be one.
	anchorTwin = "precomputed-twin"
	// anchorNoop allows every pod untouched.
	anchorNoop = "noop"
)

// anchorServer serves the anchor webhooks over HTTPS on 127.0.0.1.
type anchorServer struct {
	srv  *http.Server
	port int
}

// startAnchors serves the anchors with the manager's certificate in
// certDir; patch is the JSON patch the precomputed anchor answers with.
func startAnchors(certDir string, patch []byte) (*anchorServer, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, certs.CertFile), filepath.Join(certDir, certs.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("anchor webhooks: %w", err)
	}
	port, err := harness.FreePort()
	if err != nil {
		return nil, fmt.Errorf("anchor webhooks: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("anchor webhooks: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/"+anchorPrecomputed, fixedAnswer(patch))
	mux.Handle("/"+anchorTwin, fixedAnswer(patch))
	mux.Handle("/"+anchorNoop, fixedAnswer(nil))
	a := &anchorServer{port: port, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// As the manager without --enable-http2.
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
	}}
	go func() { _ = a.srv.ServeTLS(ln, "", "") }()
	return a, nil
}

// URL of one anchor.
func (a *anchorServer) URL(anchor string) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)) + "/" + anchor
}

func (a *anchorServer) Stop() error { return a.srv.Close() }

// fixedAnswer is a webhook that reads only the request's uid and answers
// with a response prepared once: allowed, with patch when there is one.
func fixedAnswer(patch []byte) http.Handler {
	resp := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: "UID", Allowed: true},
	}
	if len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Response.Patch, resp.Response.PatchType = patch, &pt
	}
	answer, err := json.Marshal(resp)
	if err != nil { // plain values: cannot happen
		panic(err)
	}
	head, tail, _ := bytes.Cut(answer, []byte(`"UID"`))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole body is read, as any webhook does, so the connection
		// is reused at once.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.Unmarshal(body, &review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		uid, _ := json.Marshal(review.Request.UID)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(append(append(make([]byte, 0, len(answer)+len(uid)), head...), uid...), tail...))
	})
}

// installAnchors registers the anchors with the API server as copies of
// Eurekube's own webhook configuration, each for the namespaces labelled
// with its name.
func installAnchors(ctx context.Context, cp *harness.ControlPlane, a *anchorServer, caPEM []byte) error {
	mwc, err := harness.LoadWebhookManifest()
	if err != nil {
		return err
	}
	eurekube := mwc.Webhooks[0]
	mwc.ObjectMeta = metav1.ObjectMeta{Name: "bench-anchors"}
	mwc.Webhooks = nil
	for _, anchor := range []string{anchorPrecomputed, anchorTwin, anchorNoop} {
		w := *eurekube.DeepCopy()
		url := a.URL(anchor)
		w.Name = anchor + ".bench.eurekube.io"
		w.ClientConfig.URL, w.ClientConfig.Service, w.ClientConfig.CABundle = &url, nil, caPEM
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{anchorLabel: anchor}}
		mwc.Webhooks = append(mwc.Webhooks, w)
	}
	if err := cp.Client.Create(ctx, mwc); err != nil {
		return fmt.Errorf("install the anchor webhooks: %w", err)
	}
	return nil
}

// webhookClient reaches the manager's webhook server over TLS with
// keep-alive, trusting caPEM.
func webhookClient(caPEM []byte, conns int) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("webhook client: the CA bundle holds no certificate")
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
	}}, nil
}

// eurekubePatch asks the manager's webhook for the bench pod's patch: what
// the precomputed anchor answers.
func eurekubePatch(hc *http.Client, m *manager) ([]byte, error) {
	body, err := harness.PodCreateReview("bench-0001", benchPod(injectedNamespace))
	if err != nil {
		return nil, err
	}
	resp, err := hc.Post("https://"+m.WebhookAddr()+webhook.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("eurekube's patch: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("eurekube's patch: %w", err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &review); err != nil || review.Response == nil || len(review.Response.Patch) == 0 {
		return nil, fmt.Errorf("eurekube's patch: HTTP %d, want a review with a patch (%v): %.300s", resp.StatusCode, err, data)
	}
	return review.Response.Patch, nil
}
