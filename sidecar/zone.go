package sidecar

import (
	"os"
	"strings"

	"github.com/eurekube/eurekube/eureka"
)

// The zone file holds the pod's topology.kubernetes.io/zone label (a
// downward-API volume the webhook mounts when the syncer sets no zone
// itself). Kubernetes copies the label from the pod's node when it binds
// the pod (the PodTopologyLabels admission plugin, on by default since
// 1.35), and the manager copies it where that plugin is off, so the
// registrar learns its zone without any access to the API. The file is
// read before every registration, and the instance registered again when
// what it holds changes (the manager's copy may come after the first
// registration).

// readZone is the zone the next registration carries: the file's content,
// or "" (no zone) when there is no file or it cannot be read.
func (r *Registrar) readZone() string {
	if r.cfg.ZoneFile == "" {
		return ""
	}
	content, err := os.ReadFile(r.cfg.ZoneFile)
	if err != nil {
		if !r.zoneFileUnreadable {
			r.zoneFileUnreadable = true
			r.log.WithError(err).WithField("file", r.cfg.ZoneFile).Warn("cannot read the zone file: registering without a zone")
		}
		return ""
	}
	r.zoneFileUnreadable = false
	return strings.TrimSpace(string(content))
}

// withZone adds zone to the instance's metadata unless the syncer or the
// pod set one: theirs wins.
func withZone(inst *eureka.Instance, zone string) {
	if _, set := inst.Metadata[MetaZone]; zone == "" || set {
		return
	}
	inst.Metadata[MetaZone] = zone
}
