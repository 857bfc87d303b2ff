package gateway

import (
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// Verdicts of the audit.
const (
	VerdictAllowed = "allowed"
	VerdictRefused = "refused"
	// VerdictAudited: refused by the rules, let through because the
	// gateway runs in audit mode.
	VerdictAudited = "audited"
	// VerdictAbandoned: the caller went away (its timeout, or it hung
	// up) while the gateway could not yet decide, so nothing was
	// written and no answer reached anyone. Not a refusal: no Event.
	VerdictAbandoned = "abandoned"
)

// EventReasonRefused is the reason of the Events the gateway records on a
// pod whose write it refused (or, in audit mode, would refuse): what
// `eurekube status` lists.
const (
	EventReasonRefused = "EurekaWriteRefused"
	EventReasonAudited = "EurekaWriteAudited"
)

// auditor records every write: a log line and a metric each; an Event on
// the pod for a refusal of a pod's write, at most one per pod, reason and
// minute (a registrar retries).
type auditor struct {
	log    logrus.FieldLogger
	events events.EventRecorder // nil: none
	now    func() time.Time
	mu     sync.Mutex
	last   map[string]time.Time
}

type auditRecord struct {
	id       Identity
	op       string
	app, iid string
	verdict  string
	reason   string
	msg      string
	status   int
}

func (a *auditor) record(r auditRecord) {
	writesTotal.WithLabelValues(r.op, r.id.Kind, r.verdict, r.reason).Inc()
	fields := logrus.Fields{
		"audit": true, "op": r.op, "app": r.app, "instance": r.iid,
		"identity": r.id.Kind, "who": r.id.String(), "verdict": r.verdict, "reason": r.reason, "status": r.status,
	}
	if r.id.Stale {
		fields["stale"] = true
	}
	entry := a.log.WithFields(fields)
	switch r.verdict {
	case VerdictAllowed:
		entry.Info(r.msg)
		return
	case VerdictAbandoned:
		entry.Info("abandoned by the caller before the gateway could decide: " + r.msg)
		return
	}
	entry.Warn(r.msg)
	if a.events == nil || r.id.Kind != KindPod {
		return
	}
	key := r.id.Namespace + "/" + r.id.Pod + "/" + r.reason
	now := a.now()
	a.mu.Lock()
	if a.last == nil {
		a.last = map[string]time.Time{}
	}
	if t, ok := a.last[key]; ok && now.Sub(t) < time.Minute {
		a.mu.Unlock()
		return
	}
	a.last[key] = now
	for k, t := range a.last {
		if now.Sub(t) > time.Minute {
			delete(a.last, k)
		}
	}
	a.mu.Unlock()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.id.Namespace, Name: r.id.Pod, UID: types.UID(r.id.PodUID)}}
	reason := EventReasonRefused
	if r.verdict == VerdictAudited {
		reason = EventReasonAudited
	}
	a.events.Eventf(pod, nil, corev1.EventTypeWarning, reason, r.op,
		"Eureka %s of app %s instance %s %s by Eurekube's gateway (%s): %s", r.op, r.app, r.iid, verdictWords(r.verdict), r.reason, r.msg)
}

func verdictWords(v string) string {
	if v == VerdictAudited {
		return "would be refused (audit mode lets it through)"
	}
	return "refused"
}
