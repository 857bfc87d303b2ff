package controller

import (
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// expiredLeasesShim: until Registry.ExpiredLeases lands.
func expiredLeasesShim(reg *eureka.Registry, app string) []string {
	var out []string
	for _, inst := range reg.Instances(app) {
		lease := inst.Duration
		if lease <= 0 {
			lease = 90 * time.Second
		}
		if !inst.LastUpdated.IsZero() && time.Since(inst.LastUpdated) > lease+time.Minute {
			out = append(out, inst.InstanceID)
		}
	}
	return out
}
