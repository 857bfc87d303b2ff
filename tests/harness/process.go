package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process is a program the harness started, its output in a log file. It
// runs in its own process group and is killed with the test binary if that
// dies first, so no test leaves a process behind.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// StartProcess starts bin with args and env (added to this process's
// environment), appending its output to logPath.
func StartProcess(name, bin string, args, env []string, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding the process's output.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process alone, as the kubelet signals a
// container's main process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: signal pid %d: %w", p.name, p.Pid(), err)
	}
	return nil
}

// Kill ends the process group at once (SIGKILL), as a crash or an evicted
// node would, and waits for it to be gone.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// killWithStacks has the process write where each of its threads is before
// it is killed: SIGQUIT makes a Go program write every goroutine's stack to
// its log and exit, and a JVM write a thread dump and go on. A start-up that
// hangs is then explained by the log it leaves.
func (p *Process) killWithStacks() {
	if p.Signal(syscall.SIGQUIT) == nil {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	p.Kill()
}

// Stop sends SIGTERM and waits up to 10 s before killing the group.
func (p *Process) Stop() error {
	if p.Exited() {
		return nil
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		p.Kill()
		return fmt.Errorf("%s did not stop within 10 s of SIGTERM; killed", p.name)
	}
}

// Log is the process's whole output so far.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

// ExitCode is the process's exit code once Done is closed (-1 when a
// signal ended it).
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// LogTail is the end of the process's output, for error messages.
func (p *Process) LogTail() string {
	data, _ := os.ReadFile(p.logPath)
	return tail(string(data), 3000)
}

// WaitHTTP200 waits until url answers 200 through c (nil: a plain client),
// the process exits (an error with its log), or timeout (the process writes
// its threads' stacks to its log and is killed; the error says what url last
// answered, such as a /readyz?verbose body naming the check that failed).
func (p *Process) WaitHTTP200(ctx context.Context, c *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if c == nil {
		c = &http.Client{Timeout: time.Second}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "nothing"
	for {
		resp, err := c.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during start-up (log %s):\n%s", p.name, p.logPath, p.LogTail())
		case <-ctx.Done():
			tail := p.LogTail()
			p.killWithStacks()
			return fmt.Errorf("%s: %s did not answer 200 within %s; it last answered %s (log %s, which ends with its threads' stacks):\n%s", p.name, url, timeout, last, p.logPath, tail)
		case <-tick.C:
		}
	}
}
