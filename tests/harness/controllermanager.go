package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ControllerManagerControllers are the kube-controller-manager controllers
// the harness runs: enough for Deployments to roll and for owned objects to
// be collected. Nodes, service accounts and the rest have no use without a
// kubelet and would only add load.
const ControllerManagerControllers = "deployment-controller,replicaset-controller,garbage-collector-controller"

// StartControllerManager starts kube-controller-manager (built beside
// kube-apiserver by tests/tools/envtest/build.sh) against the control plane
// and waits until it serves /healthz. It ends with ctx's caller calling
// Stop or Kill.
func (cp *ControlPlane) StartControllerManager(ctx context.Context, logPath string) (*Process, error) {
	bin := filepath.Join(cp.Env.BinaryAssetsDirectory, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w (tests/tools/envtest/build.sh builds it)", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + ControllerManagerControllers,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// The default 20 QPS makes a 500-pod rollout crawl.
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
	}
	p, err := StartProcess("kube-controller-manager", bin, args, nil, logPath)
	if err != nil {
		return nil, err
	}
	// Its serving certificate is self-signed: only whether it answers counts.
	insecure := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health check
	}}
	if err := p.WaitHTTP200(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", time.Minute); err != nil {
		return nil, err
	}
	return p, nil
}
