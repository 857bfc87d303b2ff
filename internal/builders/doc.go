// Package builders makes the objects tests create: EurekaSyncers, and the
// pods and Deployments of the apps they register. Every suite builds them
// here, so that a test reads as what sets it apart from the ordinary
// case.
//
// The ordinary case is one app: a syncer named after it registers the
// pods labelled app=<name> (AppLabel) on their container port named http
// (PortName), and its pods run one container, "app", that declares that
// port (8080, PortNumber). A builder takes the namespace and the app's
// name, then options applied in order; an option is a plain func of the
// object, so a test may pass a closure of its own for a change no option
// names.
//
// The builders set what a test must set and nothing the API server, the
// webhook or the manager default: a syncer's mode, traffic and lease, for
// example, stay empty until the API server defaults them (see
// api/v1alpha1's Effective methods).
package builders
