package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Signal sends sig (a name such as "SIGKILL" or "SIGSTOP") to a container's
// main process through containerd, as the kernel would end or a debugger
// freeze it, behind the kubelet's back. containerID is as a pod's status
// reports it, with or without its "containerd://" prefix.
func (n *Node) Signal(ctx context.Context, containerID, sig string) error {
	if _, err := n.ctr(ctx, "tasks", "kill", "--signal", sig, taskID(containerID)); err != nil {
		return fmt.Errorf("node: signal %s: %w", sig, err)
	}
	return nil
}

// ContainerPID is the host PID of a container's main process.
func (n *Node) ContainerPID(ctx context.Context, containerID string) (int, error) {
	id := taskID(containerID)
	out, err := n.ctr(ctx, "tasks", "list")
	if err != nil {
		return 0, err
	}
	// TASK PID STATUS, one line per running container.
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("node: no task of container %s", id)
}

func taskID(containerID string) string {
	_, id, found := strings.Cut(containerID, "://")
	if !found {
		return containerID
	}
	return id
}
