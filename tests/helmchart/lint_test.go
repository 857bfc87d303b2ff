package helmchart

import (
	"strings"
	"testing"
)

// everythingOn turns on every optional part of the chart.
const everythingOn = `
certificates: {mode: self-managed}
alerts: {enabled: true}
metrics: {serviceMonitor: {enabled: true, interval: 30s}}
credentialsNamespaces: [shop, billing]
manager:
  eurekaURLs: [http://eureka-0.eureka:8761/eureka, http://eureka-1.eureka:8761/eureka]
  defaultDrainSeconds: 60
  clusterID: prod-eu
  resyncPeriod: 1m
  eurekaTimeout: 3s
  excludedNamespaces: [monitoring]
  execSleepFallback: true
  logLevel: debug
  priorityClassName: system-cluster-critical
`

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
