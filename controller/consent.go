package controller

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// reasonSecretNotConsented is the EurekaReachable reason of a syncer that
// names a Secret without consent.
const reasonSecretNotConsented = "SecretNotConsented"

// secretConsented says whether the manager may use secret for the syncers
// of its namespace. Being allowed to read it (RBAC) is not enough: a
// Secret consents with the label v1alpha1.EurekaCredentialsLabel, so that
// a syncer's author cannot send a Secret that was never meant for Eureka
// (a kubernetes.io/basic-auth Secret has the same keys) to a host of their
// choosing. The one place to add other sources of consent (a cluster
// policy).
func secretConsented(secret *corev1.Secret) bool {
	return v1alpha1.SecretConsented(secret.Labels)
}

// notConsentedError: a syncer names a Secret without consent; its message
// says how to give it.
type notConsentedError struct {
	namespace, name, field string
}

func (e *notConsentedError) Error() string {
	return v1alpha1.SecretNotConsented(e.namespace, e.name, e.field) + "; to use it: " + v1alpha1.SecretConsentCommand(e.namespace, e.name)
}

// configReason is the EurekaReachable reason of an error reading what a
// syncer's spec.eureka names.
func configReason(err error) string {
	var nc *notConsentedError
	if errors.As(err, &nc) {
		return reasonSecretNotConsented
	}
	var capped *serverSetCapError
	if errors.As(err, &capped) {
		return reasonServerSetCap
	}
	return reasonEurekaConfig
}
