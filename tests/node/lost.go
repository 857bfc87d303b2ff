package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// The node lost: what a node that dies looks like from the control plane
// (its kubelet stops reporting) and from Eureka (its pods' processes stop
// answering and heartbeating), on demand and undone afterwards.

// freezerRoot is the cgroup v1 freezer hierarchy these machines mount; the
// kubelet (cgroupfs driver) keeps each pod in kubepods[/<qos>]/pod<uid>.
const freezerRoot = "/sys/fs/cgroup/freezer"

// StopKubelet stops the kubelet (SIGTERM). The pods' containers keep
// running under containerd, as they do on a node whose kubelet dies; the
// node goes NotReady once the controller manager's node monitor grace
// period passes without a status from it.
func (n *Node) StopKubelet() error {
	p, ok := n.procs["kubelet"]
	if !ok {
		return errors.New("node: no kubelet started")
	}
	if err := p.Stop(); err != nil {
		return fmt.Errorf("node: stop the kubelet: %w", err)
	}
	return nil
}

// StartKubelet starts the kubelet again, unless it runs, and waits until
// the node is Ready.
func (n *Node) StartKubelet(ctx context.Context) error {
	if p, ok := n.procs["kubelet"]; ok && !p.Exited() {
		return nil
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

// FreezePod freezes every process of the pod (the cgroup v1 freezer): they
// neither run nor answer, as on a machine that hangs.
func FreezePod(uid types.UID) error { return setPodFreezer(uid, "FROZEN") }

// ThawPod lets the pod's processes run again.
func ThawPod(uid types.UID) error { return setPodFreezer(uid, "THAWED") }

func setPodFreezer(uid types.UID, state string) error {
	var dirs []string
	for _, pattern := range []string{"kubepods*/pod" + string(uid), "kubepods*/*/pod" + string(uid)} {
		found, _ := filepath.Glob(filepath.Join(freezerRoot, pattern))
		dirs = append(dirs, found...)
	}
	if len(dirs) == 0 {
		return fmt.Errorf("node: no freezer cgroup for pod %s under %s", uid, freezerRoot)
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(state), 0o644); err != nil {
			return fmt.Errorf("node: %s pod %s: %w", state, uid, err)
		}
	}
	return nil
}

// thawAll thaws every frozen cgroup of the kubelet's, so that a teardown
// after a test that froze pods and failed can stop them.
func thawAll() {
	roots, _ := filepath.Glob(filepath.Join(freezerRoot, "kubepods*"))
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "freezer.state" {
				_ = os.WriteFile(path, []byte("THAWED"), 0o644)
			}
			return nil
		})
	}
}
