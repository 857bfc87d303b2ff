package harness_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
)

func TestEureka_TakenPortIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = harness.StartEureka(context.Background(), harness.EurekaOptions{Port: port})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" is taken") {
		t.Fatalf("StartEureka on a taken port: %v, want an error saying the port is taken", err)
	}
}
