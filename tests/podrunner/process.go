package podrunner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
)

// podProcess is one running pod: its container processes and its state.
type podProcess struct {
	runner *Runner
	key    types.NamespacedName
	uid    types.UID
	ip     string
	grace  int64
	log    logrus.FieldLogger

	mu          sync.Mutex
	containers  []*container
	terminating bool
	// crashed: every container was killed and stays down (Runner.Crash).
	crashed bool
	done    chan struct{}
}

type container struct {
	spec    *corev1.Container
	bin     string
	env     []string
	logPath string

	cmd      *exec.Cmd
	exited   chan struct{}
	ready    bool
	restarts int32
}

func (pp *podProcess) startAll() error {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, c := range pp.containers {
		if err := c.start(); err != nil {
			return fmt.Errorf("start %s/%s: %w", pp.key, c.spec.Name, err)
		}
	}
	return nil
}

func (c *container) start() error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	c.cmd, c.exited, c.ready = cmd, exited, false
	return nil
}

func (c *container) running() bool {
	if c.exited == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (c *container) signal(sig syscall.Signal) {
	if c.running() {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	}
}

// probeLoop runs readiness probes, restarts crashed containers
// (restartPolicy Always) and writes the pod's status when it changes.
func (pp *podProcess) probeLoop(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastProbe := map[string]time.Time{}
	var written string
	for {
		pp.mu.Lock()
		if pp.terminating || pp.crashed {
			pp.mu.Unlock()
			return
		}
		for _, c := range pp.containers {
			if !c.running() {
				c.ready = false
				c.restarts++
				pp.log.WithField("container", c.spec.Name).Warn("container exited; restarting")
				if err := c.start(); err != nil {
					pp.log.WithError(err).Warn("restart container")
				}
				continue
			}
			period := time.Second
			if p := c.spec.ReadinessProbe; p != nil && p.PeriodSeconds > 0 {
				period = time.Duration(p.PeriodSeconds) * time.Second
			}
			if time.Since(lastProbe[c.spec.Name]) >= period || !c.ready {
				lastProbe[c.spec.Name] = time.Now()
				c.ready = probe(ctx, pp.ip, c.spec) == nil
			}
		}
		state := pp.stateKey()
		pp.mu.Unlock()
		if state != written {
			if err := pp.writeStatus(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				pp.log.WithError(err).Debug("write pod status")
			} else {
				written = state
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-pp.done:
			return
		case <-tick.C:
		}
	}
}

// probe runs one readiness probe; no probe means ready once running.
func probe(ctx context.Context, ip string, ctr *corev1.Container) error {
	p := ctr.ReadinessProbe
	if p == nil {
		return nil
	}
	timeout := time.Second
	if p.TimeoutSeconds > 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		url := fmt.Sprintf("http://%s%s", net.JoinHostPort(ip, portOf(ctr, p.HTTPGet.Port)), p.HTTPGet.Path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(ip, portOf(ctr, p.TCPSocket.Port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return nil
}

// portOf resolves a probe's or hook's port, by number or by the name of
// one of the container's ports.
func portOf(ctr *corev1.Container, port intstr.IntOrString) string {
	if port.Type == intstr.String {
		for _, p := range ctr.Ports {
			if p.Name == port.StrVal {
				return strconv.Itoa(int(p.ContainerPort))
			}
		}
	}
	return port.String()
}

func (pp *podProcess) stateKey() string {
	s := ""
	for _, c := range pp.containers {
		s += fmt.Sprintf("%s:%v:%v:%d;", c.spec.Name, c.running(), c.ready, c.restarts)
	}
	return s
}

// writeStatus reports the pod Running with its IP, container states and
// the Ready condition, as a kubelet does.
func (pp *podProcess) writeStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod corev1.Pod
		if err := pp.runner.client.Get(ctx, pp.key, &pod); err != nil {
			return err
		}
		if pod.UID != pp.uid {
			return nil
		}
		pp.mu.Lock()
		allReady := true
		var statuses []corev1.ContainerStatus
		for _, c := range pp.containers {
			running := c.running()
			st := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, Ready: c.ready && running, RestartCount: c.restarts, Started: &running}
			switch {
			case running:
				st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
			case pp.terminating && c.cmd != nil && c.cmd.ProcessState != nil:
				code := int32(c.cmd.ProcessState.ExitCode())
				reason := "Completed"
				if code != 0 {
					reason = "Error"
				}
				st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.Now()}
			default:
				st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
			}
			allReady = allReady && st.Ready
			statuses = append(statuses, st)
		}
		pp.mu.Unlock()
		ready := corev1.ConditionFalse
		if allReady {
			ready = corev1.ConditionTrue
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP, pod.Status.PodIPs = pp.ip, []corev1.PodIP{{IP: pp.ip}}
		pod.Status.HostIP, pod.Status.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = &now
		}
		pod.Status.ContainerStatuses = statuses
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
		}
		return pp.runner.client.Status().Update(ctx, &pod)
	})
}

// terminate stops the pod in kubelet order, once.
func (pp *podProcess) terminate(pod *corev1.Pod) {
	pp.mu.Lock()
	if pp.terminating {
		pp.mu.Unlock()
		return
	}
	pp.terminating = true
	pp.mu.Unlock()
	grace := pp.grace
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	pp.log.WithField("grace", grace).Info("terminating pod")
	go func() {
		deadline := time.After(time.Duration(grace) * time.Second)
		var wg sync.WaitGroup
		for _, c := range pp.containers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runPreStop(pp.ip, c.spec)
				c.signal(syscall.SIGTERM)
				<-c.exited
				// As the kubelet shows it: this container has terminated
				// while the others may still drain.
				if err := pp.writeStatus(context.Background()); err != nil {
					pp.log.WithError(err).Debug("write pod status")
				}
			}()
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-deadline:
			pp.log.Warn("grace period over; killing")
			pp.kill()
			<-stopped
		}
		close(pp.done)
		if err := pp.runner.remove(context.Background(), pod); err != nil {
			pp.log.WithError(err).Warn("remove pod")
		}
	}()
}

// runPreStop runs a container's preStop hook: the sleep action, an
// exec of "sleep N", or an HTTP GET. Other exec hooks are not supported and
// skipped with no wait.
func runPreStop(ip string, ctr *corev1.Container) {
	lc := ctr.Lifecycle
	if lc == nil || lc.PreStop == nil {
		return
	}
	h := lc.PreStop
	switch {
	case h.Sleep != nil:
		time.Sleep(time.Duration(h.Sleep.Seconds) * time.Second)
	case h.Exec != nil && len(h.Exec.Command) == 2 && h.Exec.Command[0] == "sleep":
		if n, err := strconv.Atoi(h.Exec.Command[1]); err == nil {
			time.Sleep(time.Duration(n) * time.Second)
		}
	case h.HTTPGet != nil:
		resp, err := http.Get(fmt.Sprintf("http://%s%s", net.JoinHostPort(ip, portOf(ctr, h.HTTPGet.Port)), h.HTTPGet.Path))
		if err == nil {
			resp.Body.Close()
		}
	}
}

func (pp *podProcess) kill() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, c := range pp.containers {
		c.signal(syscall.SIGKILL)
	}
}
