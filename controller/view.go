package controller

import (
	"fmt"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// The migration view: where the syncer's app runs and where its calls go,
// read from the registry read the reconciler makes anyway (no request of
// its own).

// appView counts the instances of one app by where they run and their
// status.
type appView struct {
	here      map[eureka.Status]int32 // this syncer's instances
	elsewhere map[eureka.Status]int32 // VMs and other clusters
}

func newAppView(here, elsewhere []eureka.Instance) appView {
	v := appView{here: map[eureka.Status]int32{}, elsewhere: map[eureka.Status]int32{}}
	for _, inst := range here {
		v.here[inst.Status]++
	}
	for _, inst := range elsewhere {
		v.elsewhere[inst.Status]++
	}
	return v
}

func total(counts map[eureka.Status]int32) int32 {
	var n int32
	for _, c := range counts {
		n += c
	}
	return n
}

// trafficTo says where callers' calls go: to the UP instances, since
// Eureka clients list only those.
func (v appView) trafficTo() v1alpha1.TrafficTo {
	here, elsewhere := v.here[eureka.StatusUp] > 0, v.elsewhere[eureka.StatusUp] > 0
	switch {
	case here && elsewhere:
		return v1alpha1.TrafficToBoth
	case here:
		return v1alpha1.TrafficToHere
	case elsewhere:
		return v1alpha1.TrafficToElsewhere
	default:
		return v1alpha1.TrafficToNowhere
	}
}

// apply writes the view into a status.
func (v appView) apply(st *v1alpha1.EurekaSyncerStatus) {
	st.RegisteredInstances, st.UpInstances = total(v.here), v.here[eureka.StatusUp]
	st.DownInstances = v.here[eureka.StatusDown]
	st.OutOfServiceInstances = v.here[eureka.StatusOutOfService]
	st.StartingInstances = v.here[eureka.StatusStarting]
	st.ElsewhereInstances, st.ElsewhereUpInstances = total(v.elsewhere), v.elsewhere[eureka.StatusUp]
	st.Elsewhere = fmt.Sprintf("%d/%d", st.ElsewhereUpInstances, st.ElsewhereInstances)
	st.TrafficTo = v.trafficTo()
}

// elsewhereOf returns the instances of app in the registry that no
// Eurekube of this cluster registered: what runs on VMs and in other
// clusters. Instances of this cluster registered by other syncers (the
// same app in another namespace) are neither here nor elsewhere.
func elsewhereOf(all []eureka.Instance, clusterID string) []eureka.Instance {
	var out []eureka.Instance
	for _, inst := range all {
		if inst.Metadata[eureka.MetaManagedBy] == eureka.ManagedByValue && inst.Metadata[eureka.MetaCluster] == clusterID {
			continue
		}
		out = append(out, inst)
	}
	return out
}
