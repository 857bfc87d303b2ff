package manager

import (
	"sync"

	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// globalLogs sets the process-wide loggers once: klog's and
// controller-runtime's are globals that informers already running read
// without a lock, so a second Run in the same process (a test's replicas)
// must not set them again (the race detector saw it).
var globalLogs sync.Once

// bridgeLogs makes controller-runtime and client-go (klog) write through
// entry, so every line of the manager has the same JSON shape, and returns
// entry as a logr.Logger for this Run's manager. The process-wide loggers
// are those of the first Run.
func bridgeLogs(entry *logrus.Entry) logr.Logger {
	lg := logrusr.New(entry)
	globalLogs.Do(func() {
		ctrllog.SetLogger(lg)
		klog.SetLogger(lg)
	})
	return lg
}
