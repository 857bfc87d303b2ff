package v1alpha1

import "fmt"

// SecretConsented says whether a Secret's labels consent to its use for
// Eureka access (EurekaCredentialsLabel set to "true").
func SecretConsented(labels map[string]string) bool {
	return labels[EurekaCredentialsLabel] == "true"
}

// SecretConsentCommand is the kubectl command that gives a Secret's
// consent.
func SecretConsentCommand(namespace, name string) string {
	return fmt.Sprintf("kubectl -n %s label secret %s %s=true", namespace, name, EurekaCredentialsLabel)
}

// SecretNotConsented says that the Secret namespace/name, named by a
// syncer's field, is not used for lack of consent. The manager's condition
// and `eurekube check` both print it, with SecretConsentCommand as the fix.
func SecretNotConsented(namespace, name, field string) string {
	return fmt.Sprintf("Secret %s/%s (%s) is not used: it lacks the label %s=true by which a Secret consents to being sent to the syncers' Eureka servers",
		namespace, name, field, EurekaCredentialsLabel)
}
