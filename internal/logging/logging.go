// Package logging is the one logger setup of Eurekube's binaries: logrus
// writing JSON lines. The manager bridges it into logr for controller-runtime
// and klog (cmd/manager); the registrar uses it as is and stays free of
// Kubernetes libraries.
package logging

import (
	"fmt"
	"io"

	"github.com/sirupsen/logrus"
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
