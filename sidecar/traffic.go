package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// The traffic file holds the pod's eurekube.io/traffic annotation (a
// downward-API volume the webhook mounts): its syncer's spec.traffic, which
// the manager keeps current. The registrar reads it before every
// registration, so that a pod of a Standby syncer is OUT_OF_SERVICE from its
// first registration, and after every re-registration (Eureka restarted,
// the lease lost): the manager's override comes only at its next pass.

// The values of the annotation, v1alpha1.TrafficServe, TrafficStandby and
// TrafficDetached (the registrar does not import the API, to stay small).
// Detached is written by the manager on the pods of a deleted syncer: the
// registrar cancels its registration and registers no more, so that
// uninstalling Eurekube leaves nothing in Eureka while the apps keep
// running (the idle sidecar leaves at their next rollout).
const (
	trafficServe    = "Serve"
	trafficStandby  = "Standby"
	trafficDetached = "Detached"
)

// trafficOverride is the status override a registration carries for the
// traffic file's content: OUT_OF_SERVICE for Standby, none for Serve or an
// empty file.
//
// Any other content is an error, and still OUT_OF_SERVICE: the registrar
// fails closed. A wrong Standby heals by itself, since the manager removes
// the overrides of a Serve syncer's instances at its next pass; a wrong
// Serve would send callers to a pod meant to stay out of traffic, and
// nothing would take it out until the manager's next pass either.
func trafficOverride(content string) (eureka.Status, error) {
	switch strings.TrimSpace(content) {
	case trafficStandby, trafficDetached:
		return eureka.StatusOutOfService, nil
	case trafficServe, "":
		return "", nil
	default:
		return eureka.StatusOutOfService, fmt.Errorf("traffic %q: want %s, %s or %s", strings.TrimSpace(content), trafficServe, trafficStandby, trafficDetached)
	}
}

// readTrafficOverride reads the traffic file and returns the override the
// next registration carries. Eureka adds a registration's override only
// when the instance has none: an override the manager set stays whatever
// the file says, and one the manager removed comes back only while the
// file still says Standby (the kubelet refreshes the file up to a minute
// or so after the annotation changes), until the manager's next pass.
func (r *Registrar) readTrafficOverride() eureka.Status {
	file := r.cfg.TrafficFile
	if file == "" {
		return ""
	}
	log := r.log.WithField("file", file)
	content, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A pod injected before the traffic file existed: it takes traffic
		// as it always did, and the manager overrides it when its syncer
		// is Standby.
		if !r.trafficFileMissing {
			r.trafficFileMissing = true
			log.Info("no traffic file: registering without a status override")
		}
		return ""
	case err != nil:
		log.WithError(err).Warn("cannot read the traffic file: registering OUT_OF_SERVICE until it can be read")
		return eureka.StatusOutOfService
	}
	r.trafficFileMissing = false
	override, err := trafficOverride(string(content))
	if err != nil {
		log.WithError(err).WithField("override", override).Warn("unexpected traffic file: registering OUT_OF_SERVICE")
	}
	return override
}

// detached is true while the traffic file says Detached: the pod's syncer
// is gone. It is read before every heartbeat and registration; a missing
// or unreadable file is not Detached (readTrafficOverride reports those).
func (r *Registrar) detached() bool {
	if r.cfg.TrafficFile == "" {
		return false
	}
	content, err := os.ReadFile(r.cfg.TrafficFile)
	return err == nil && strings.TrimSpace(string(content)) == trafficDetached
}

// trafficCheck is how often the registrar looks at the traffic file between
// its turns. Its turns come a renewal interval apart (30 s by default), and
// waiting for the next one kept a pod whose syncer was deleted in Eureka,
// and so its namespace's deletion or Eurekube's uninstall waiting, up to
// that long after the kubelet wrote Detached (24–26 s in the lifecycle
// story); reading a small file once a second costs nothing.
const trafficCheck = time.Second

// watchDetached says on changed, within trafficCheck, whenever the traffic
// file starts or stops saying Detached, until ctx ends.
func (r *Registrar) watchDetached(ctx context.Context, changed chan<- struct{}) {
	if r.cfg.TrafficFile == "" {
		return
	}
	tick := time.NewTicker(trafficCheck)
	defer tick.Stop()
	was := r.detached()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if now := r.detached(); now != was {
				was = now
				select {
				case changed <- struct{}{}:
				default: // one already waits: the turn reads the file anew
				}
			}
		}
	}
}
