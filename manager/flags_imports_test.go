package manager

import (
	"io"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/controller"
)

func TestParseFlags_TheImportRangesAreRepeatableBothFamiliesAndMasked(t *testing.T) {
	cfg, err := ParseFlags([]string{"--registrar-image=r:1", "--pod-cidr=10.244.0.0/16,fd00:10:244::/56", "--pod-cidr=10.245.1.7/24",
		"--service-cidr=10.96.0.0/12", "--max-pattern-apps=50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var pods, services []string
	for _, p := range cfg.podCIDRs() {
		pods = append(pods, p.String())
	}
	for _, p := range cfg.serviceCIDRs() {
		services = append(services, p.String())
	}
	if got := strings.Join(pods, " "); got != "10.244.0.0/16 fd00:10:244::/56 10.245.1.0/24" {
		t.Errorf("--pod-cidr %s", got)
	}
	if got := strings.Join(services, " "); got != "10.96.0.0/12" {
		t.Errorf("--service-cidr %s", got)
	}
	if cfg.MaxPatternApps != 50 {
		t.Errorf("--max-pattern-apps %d", cfg.MaxPatternApps)
	}
	defaults, err := ParseFlags([]string{"--registrar-image=r:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(defaults.PodCIDRs)+len(defaults.ServiceCIDRs) != 0 || defaults.MaxPatternApps != controller.DefaultMaxPatternApps {
		t.Errorf("defaults %v %v %d: want the ranges detected and the cap %d", defaults.PodCIDRs, defaults.ServiceCIDRs, defaults.MaxPatternApps, controller.DefaultMaxPatternApps)
	}
}

func TestParseFlags_RefusesABadRangeNamingTheFlagAndTheValue(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--pod-cidr=10.244.0.0", `--pod-cidr "10.244.0.0": want a range such as 10.244.0.0/16`},
		{"--service-cidr=10.96.0.0/40", `--service-cidr "10.96.0.0/40"`},
		{"--max-pattern-apps=-1", "--max-pattern-apps -1: want a positive number"},
	} {
		if _, err := ParseFlags([]string{"--registrar-image=r:1", tc.arg}, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.arg, err, tc.want)
		}
	}
}
