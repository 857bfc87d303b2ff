package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The registrar's resident memory is mostly its binary's own pages, so a
// library pulled in for convenience costs every pod. These were measured:
// the Prometheus client library with protobuf was 2.3 MB of a 9.8 MB binary.
var heavyImports = []string{
	"k8s.io/",
	"sigs.k8s.io/",
	"github.com/prometheus/",
	"google.golang.org/protobuf/",
	"google.golang.org/grpc",
	"go.opentelemetry.io/",
}

func TestRegistrar_ImportsNoHeavyLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, heavy := range heavyImports {
			if strings.HasPrefix(pkg, heavy) {
				t.Errorf("the registrar imports %s", pkg)
			}
		}
	}
}
