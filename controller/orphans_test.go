package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/eureka"
)

func TestOrphanSuspects_OnlyInstancesNamingAnUnknownPodUID(t *testing.T) {
	inst := func(uid string) eureka.Instance {
		return eureka.Instance{InstanceID: "i-" + uid, Metadata: map[string]string{eureka.MetaPodUID: uid}}
	}
	known := map[types.UID]struct{}{"alive": {}}
	got := orphanSuspects([]eureka.Instance{inst("alive"), inst("gone"), inst(""), {InstanceID: "no-metadata"}}, known)
	if len(got) != 1 {
		t.Fatalf("suspects %v, want only gone", got)
	}
	if _, ok := got["gone"]; !ok {
		t.Fatalf("suspects %v, want gone", got)
	}
}
