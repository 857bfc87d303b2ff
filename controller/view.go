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
	others    map[eureka.Status]int32 // other syncers of this cluster
}

func newAppView(here, elsewhere, others []eureka.Instance) appView {
	v := appView{here: byStatus(here), elsewhere: byStatus(elsewhere), others: byStatus(others)}
	return v
}

func byStatus(insts []eureka.Instance) map[eureka.Status]int32 {
	counts := map[eureka.Status]int32{}
	for _, inst := range insts {
		counts[inst.Status]++
	}
	return counts
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
	st.OtherSyncersInstances, st.OtherSyncersUpInstances = total(v.others), v.others[eureka.StatusUp]
	st.TrafficTo = v.trafficTo()
}
