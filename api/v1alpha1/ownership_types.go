package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Who may register which Eureka app. Eureka has no authorisation of its
// own, so Eurekube is the only gate between a namespace and the registry:
// the platform team grants app names to namespaces with
// EurekaAppPolicies; an app no policy names belongs to the first namespace
// of the cluster that registers it, which an EurekaAppClaim records.
// internal/ownership holds the rules; these are their objects.

// ElsewhereRule says whether namespaces may register an app that already
// has instances outside this cluster's Eurekube (VMs, other clusters).
// +kubebuilder:validation:Enum=Join;Refuse
type ElsewhereRule string

// Elsewhere rules.
const (
	// ElsewhereJoin lets the namespaces register beside the app's
	// instances elsewhere: a migration from VMs.
	ElsewhereJoin ElsewhereRule = "Join"
	// ElsewhereRefuse keeps the namespaces out of an app that has
	// instances elsewhere: an app name that must be new.
	ElsewhereRefuse ElsewhereRule = "Refuse"
)

// EurekaAppPolicySpec grants Eureka app names to namespaces.
// +kubebuilder:validation:XValidation:rule="(has(self.namespaces) && size(self.namespaces) > 0) || has(self.namespaceSelector) || (has(self.clientSecrets) && size(self.clientSecrets) > 0)",message="name who the policy grants the apps to: namespaces, namespaceSelector, clientSecrets, or several"
type EurekaAppPolicySpec struct {
	// Apps are the Eureka app names the namespaces may register, as
	// patterns: '*' stands for any run of characters (PAYMENTS, PAYMENTS-*,
	// *). Case does not matter, as Eureka upper-cases app names. An app that
	// any policy names may be registered only from the namespaces of the
	// policies that name it; the first-come rule no longer applies to it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9._*-]+$`
	Apps []string `json:"apps"`

	// Namespaces are namespaces, by name, that may register the apps.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects, by label, more namespaces that may
	// register the apps. An empty selector selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Elsewhere says whether the namespaces may register an app that
	// already has instances that no Eurekube of this cluster registered
	// (VMs, other clusters): Join (the default, a migration) or Refuse.
	// A refused syncer's condition Permitted says so and the webhook
	// refuses its new pods; the pods it registered earlier stay until they
	// are replaced.
	// +optional
	// +kubebuilder:default=Join
	Elsewhere ElsewhereRule `json:"elsewhere,omitempty"`

	// ClientSecrets name Secrets of type kubernetes.io/basic-auth in the
	// namespace Eurekube's gateway runs in. A client outside the cluster
	// (a VM) that sends one's username and password to the gateway may
	// write the apps of this policy through it: register, heartbeat,
	// cancel, status and metadata. The namespaces of the policy are not
	// involved: the Secret is the client's identity.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=set
	ClientSecrets []string `json:"clientSecrets,omitempty"`
}

// EffectiveElsewhere is spec.elsewhere, Join when unset.
func (s EurekaAppPolicySpec) EffectiveElsewhere() ElsewhereRule {
	if s.Elsewhere == "" {
		return ElsewhereJoin
	}
	return s.Elsewhere
}

// EurekaAppPolicy says which namespaces may register which Eureka apps.
// Cluster-scoped, so that only whoever may write cluster-scoped objects
// (the platform team, by RBAC) sets it; the namespaces it governs cannot.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=eap,categories=eurekube
// +kubebuilder:printcolumn:name="Apps",type=string,JSONPath=`.spec.apps`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Elsewhere",type=string,JSONPath=`.spec.elsewhere`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EurekaAppPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the platform team grants.
	Spec EurekaAppPolicySpec `json:"spec"`
}

// EurekaAppPolicyList is a list of EurekaAppPolicies.
// +kubebuilder:object:root=true
type EurekaAppPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the policies.
	Items []EurekaAppPolicy `json:"items"`
}

// EurekaAppClaimSpec records which namespace an app belongs to.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a claim does not change hands: delete it to release the app (the next namespace to register it then claims it)"
type EurekaAppClaimSpec struct {
	// App is the Eureka app name, upper-cased.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Z0-9]([A-Z0-9._-]*[A-Z0-9])?$`
	App string `json:"app"`
	// Namespace is the namespace the app belongs to: the first of this
	// cluster to register it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
}

// EurekaAppClaim records that an app that no EurekaAppPolicy names belongs
// to the first namespace of this cluster that registered it. Ownership is
// earned by registering: the manager creates it when a namespace's first
// pod (or Service-mode syncer) registers the app, never for a syncer that
// only names it or that is refused (its name is unique, so two namespaces
// cannot both be first). Once the namespace registers the app no more, the
// claim is held for it (annotation eurekube.io/held-until, the manager's
// --claim-hold) so that deleting and re-creating a syncer, a Recreate
// rollout or a restart never lets another namespace take the app; then it
// is deleted. The platform team hands an app on with an EurekaAppPolicy,
// which governs over claims, or by deleting the claim once its namespace
// registers the app no more.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=eac,categories=eurekube
// +kubebuilder:printcolumn:name="App",type=string,JSONPath=`.spec.app`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Held-Until",type=string,JSONPath=`.metadata.annotations.eurekube\.io/held-until`,description="Set while the namespace registers the app no more: the claim is held for it until then"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EurekaAppClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the app and its namespace.
	Spec EurekaAppClaimSpec `json:"spec"`
}

// EurekaAppClaimList is a list of EurekaAppClaims.
// +kubebuilder:object:root=true
type EurekaAppClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the claims.
	Items []EurekaAppClaim `json:"items"`
}
