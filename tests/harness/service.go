package harness

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Service stands in for a Kubernetes Service in front of several replicas:
// a TCP load balancer on 127.0.0.1 that hands each connection to the next
// backend in turn and skips a backend it cannot connect to, as kube-proxy
// does once the dead endpoint is gone. It lets the API server reach two
// manager replicas through one webhook URL, so one of them can be killed.
type Service struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// StartService listens on a free loopback port and balances over backends
// (host:port each).
func StartService(backends ...string) (*Service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	s := &Service{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Addr is the service's host:port.
func (s *Service) Addr() string { return s.ln.Addr().String() }

// Port is the service's port.
func (s *Service) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// SetBackends replaces the backends for new connections.
func (s *Service) SetBackends(backends ...string) {
	s.mu.Lock()
	s.backends = backends
	s.mu.Unlock()
}

// Close stops the service and closes every connection.
func (s *Service) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Service) serve() {
	defer s.wg.Done()
	for {
		client, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.pipe(client)
	}
}

// dial connects to the next backend that accepts, trying each once.
func (s *Service) dial() (net.Conn, error) {
	s.mu.Lock()
	backends := append([]string(nil), s.backends...)
	start := s.next
	s.next++
	s.mu.Unlock()
	if len(backends) == 0 {
		return nil, fmt.Errorf("service %s: no backends", s.Addr())
	}
	var lastErr error
	for i := range backends {
		conn, err := net.DialTimeout("tcp", backends[(start+i)%len(backends)], time.Second)
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("service %s: every backend refused: %w", s.Addr(), lastErr)
}

func (s *Service) pipe(client net.Conn) {
	defer s.wg.Done()
	server, err := s.dial()
	if err != nil {
		client.Close()
		return
	}
	s.mu.Lock()
	s.conns[client], s.conns[server] = struct{}{}, struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, client)
		delete(s.conns, server)
		s.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	<-done
}
