// Package v1alpha1 holds the EurekaSyncer API: which pods of a namespace are
// registered in Eureka, under which application, on which port and with
// which metadata. Validation, defaults and printer columns live on the types
// as kubebuilder markers; deepcopy and the CRD are generated from them.
//
// +kubebuilder:object:generate=true
// +groupName=eurekube.io
package v1alpha1
