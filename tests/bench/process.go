package bench

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is a program the bench started, its output in a log file, killed
// with the bench if the bench dies first.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startProcess runs bin with exactly env (no inherited environment but
// PATH), appending its output to logPath.
func startProcess(bin string, env []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process alone, as the kubelet signals a
// container's main process.
func (p *process) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal pid %d: %w", p.pid(), err)
	}
	return nil
}

// stop sends SIGTERM and waits up to timeout before killing the group.
func (p *process) stop(timeout time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}
