// Package controller is the EurekaSyncer reconciler. For each syncer it
// measures the selected pods (from the manager's cache) and this cluster's
// instances of the syncer (from Eureka, which cannot be watched, so every
// syncer is requeued each resync period), writes the status when something
// changed, and removes orphans: instances carrying this cluster's markers
// whose pod no longer exists, confirmed with an uncached read. It never
// touches an instance without this cluster's markers.
//
// Deleting a syncer (finalizer eurekube.io/finalizer) detaches it: the
// webhook stops injecting at once; instances of running pods are
// re-registered DOWN (a client-reported DOWN wins over Eureka's lease
// rules, and unlike the /status override it is not sticky), so callers stop
// using them; they leave Eureka when their pods stop, and the finalizer is
// released once none is left. Events tell the operator to restart the pods
// to remove the sidecars.
package controller
