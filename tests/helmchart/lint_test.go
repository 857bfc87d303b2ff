package helmchart

import (
	"strings"
	"testing"
)

func TestLint_StrictPassesForTheDefaultsAndWithEverythingOn(t *testing.T) {
	for name, values := range map[string]string{"defaults": "", "everything on": everythingOn} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir()}, valuesFile(t, values)...)
			out, err := run(tools.helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "0 chart(s) failed") {
				t.Errorf("helm lint: %s", out)
			}
		})
	}
}
