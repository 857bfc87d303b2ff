// Package ownership decides which namespace may register which Eureka app.
// The platform team grants app names with EurekaAppPolicies; an app that
// no policy names belongs to the first namespace of the cluster that
// registers it, recorded in an EurekaAppClaim. Decide is the rule, without
// I/O, shared by the webhook (which refuses a pod) and the reconciler
// (which sets a syncer's Permitted condition); Checker reads the objects
// and makes the claim.
package ownership
