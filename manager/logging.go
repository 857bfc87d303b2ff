package manager

import (
	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// bridgeLogs makes controller-runtime and client-go (klog) write through
// entry, so every line of the manager has the same JSON shape.
func bridgeLogs(entry *logrus.Entry) logr.Logger {
	lg := logrusr.New(entry)
	ctrllog.SetLogger(lg)
	klog.SetLogger(lg)
	return lg
}
