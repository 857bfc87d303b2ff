// Package logging is the one logger setup of Eurekube's binaries: logrus
// writing JSON lines, bridged into logr for controller-runtime and
// client-go (klog), so every line of a binary has one shape.
package logging

import (
	"fmt"
	"io"

	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// New returns a JSON logrus logger at level ("debug", "info", "warn",
// "error") writing to out, with the component field set.
func New(out io.Writer, level, component string) (*logrus.Entry, error) {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	l := logrus.New()
	l.SetOutput(out)
	l.SetLevel(lvl)
	l.SetFormatter(&logrus.JSONFormatter{})
	return l.WithField("component", component), nil
}

// Logr bridges entry into logr and installs it as controller-runtime's and
// klog's logger.
func Logr(entry *logrus.Entry) logr.Logger {
	lg := logrusr.New(entry)
	ctrllog.SetLogger(lg)
	klog.SetLogger(lg)
	return lg
}
