package harness

import (
	"fmt"
	"sort"
)

// StartRegistrar runs the registrar binary as the kubelet runs the injected
// container: env is the container's environment with the downward API
// resolved. Its output goes to logPath.
func StartRegistrar(bin string, env map[string]string, logPath string) (*Process, error) {
	vars := make([]string, 0, len(env))
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	sort.Strings(vars)
	p, err := StartProcess("registrar", bin, nil, vars, logPath)
	if err != nil {
		return nil, fmt.Errorf("registrar %s: %w", env["EUREKUBE_POD_NAME"], err)
	}
	return p, nil
}
