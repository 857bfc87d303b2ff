package webhook

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
)

// Bounds shared with the CRD's validation, so an annotation allows what the
// syncer's spec allows.
const (
	maxAppNameLength       = 128
	maxVIPAddressLength    = 253
	maxPreStopSleepSeconds = 3600
	maxHealthPathLength    = 1024
	maxMetadataKeyLength   = 128
	maxMetadataValueLength = 1024
)

var (
	appNamePattern     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	vipAddressPattern  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._,-]*[A-Za-z0-9])?$`)
	metadataKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
)

// Overrides are a pod's eurekube.io/ annotations, parsed and validated once.
// A zero field means "not set": the syncer's spec or the manager's default
// applies.
type Overrides struct {
	// Inject is false when the pod opted out with eurekube.io/inject=false.
	Inject *bool
	// Status is eurekube.io/status, written by the webhook on injection.
	Status string
	// Syncer is eurekube.io/syncer, written by the webhook on injection.
	Syncer string
	// Traffic is eurekube.io/traffic, written by the webhook on injection
	// (the syncer's spec.traffic, which replaces it) and kept current by
	// the reconciler.
	Traffic string

	AppName          string
	VIPAddress       string
	SecureVIPAddress string
	Port             *intstr.IntOrString
	SecurePort       *intstr.IntOrString
	PreStopSleep     *int32

	Protocol       v1alpha1.Protocol
	ManagementPort *intstr.IntOrString
	ManagementPath string

	HealthType   v1alpha1.HealthCheckType
	HealthScheme string
	HealthPath   string
	HealthPort   *intstr.IntOrString

	SidecarCPU    *resource.Quantity
	SidecarMemory *resource.Quantity

	// Metadata holds the eurekube.io/metadata.<key> entries by <key>.
	Metadata map[string]string
}

// AnnotationError says which annotation is wrong, its value and what is
// allowed. Its message is what a denied user reads.
type AnnotationError struct {
	Key     string
	Value   string
	Allowed string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: invalid value %q: %s", e.Key, e.Value, e.Allowed)
}

// AnnotationErrors are all the bad annotations of one pod, sorted by key,
// so a user fixes them in one go.
type AnnotationErrors []*AnnotationError

func (es AnnotationErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// annotationParser parses one known annotation's value into o, or returns
// what is allowed.
type annotationParser func(o *Overrides, value string) (allowed string, ok bool)

var annotationParsers = map[string]annotationParser{
	v1alpha1.AnnotationInject: func(o *Overrides, v string) (string, bool) {
		b, ok := parseBool(v)
		o.Inject = &b
		return `"true" or "false"`, ok
	},
	v1alpha1.StatusAnnotation: func(o *Overrides, v string) (string, bool) {
		o.Status = v
		return fmt.Sprintf("%q or %q (the annotation is written by Eurekube; remove it)", v1alpha1.StatusInjected, v1alpha1.StatusSkipped),
			v == v1alpha1.StatusInjected || v == v1alpha1.StatusSkipped
	},
	// Eurekube writes the next three on the pods it injects or skips; a pod
	// that carries them (reinvocation, `eurekube inject` output) is
	// admitted back, and Inject writes them anew.
	v1alpha1.AdaptationsAnnotation: func(_ *Overrides, v string) (string, bool) {
		_, err := v1alpha1.DecodeAdaptations(v)
		return "a JSON list of {reason, message} (the annotation is written by Eurekube; remove it)", err == nil
	},
	v1alpha1.DrainAnnotation: func(_ *Overrides, v string) (string, bool) {
		n, err := strconv.ParseInt(v, 10, 32)
		return "whole seconds (the annotation is written by Eurekube; set eurekube.io/prestop-sleep instead)", err == nil && n >= 0
	},
	v1alpha1.RegistrarImageAnnotation: func(_ *Overrides, v string) (string, bool) {
		return "an image reference (the annotation is written by Eurekube; remove it)", v != "" && !strings.ContainsAny(v, " \t\n")
	},
	v1alpha1.SyncerAnnotation: func(o *Overrides, v string) (string, bool) {
		o.Syncer = v
		return "the name of an EurekaSyncer (the annotation is written by Eurekube; remove it)", len(validation.IsDNS1123Subdomain(v)) == 0
	},
	v1alpha1.TrafficAnnotation: func(o *Overrides, v string) (string, bool) {
		o.Traffic = v
		return fmt.Sprintf("%q, %q or %q (the annotation is written by Eurekube from the syncer's spec.traffic; remove it)", v1alpha1.TrafficServe, v1alpha1.TrafficStandby, v1alpha1.TrafficDetached),
			v == string(v1alpha1.TrafficServe) || v == string(v1alpha1.TrafficStandby) || v == v1alpha1.TrafficDetached
	},
	v1alpha1.AnnotationAppName: func(o *Overrides, v string) (string, bool) {
		o.AppName = v
		return fmt.Sprintf("an application name of letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most %d characters", maxAppNameLength),
			len(v) <= maxAppNameLength && appNamePattern.MatchString(v)
	},
	v1alpha1.AnnotationVIPAddress: func(o *Overrides, v string) (string, bool) {
		o.VIPAddress = v
		return vipAllowed, validVIP(v)
	},
	v1alpha1.AnnotationSecureVIPAddress: func(o *Overrides, v string) (string, bool) {
		o.SecureVIPAddress = v
		return vipAllowed, validVIP(v)
	},
	v1alpha1.AnnotationPort: func(o *Overrides, v string) (string, bool) {
		p, ok := parsePort(v)
		o.Port = &p
		return portAllowed, ok
	},
	v1alpha1.AnnotationSecurePort: func(o *Overrides, v string) (string, bool) {
		p, ok := parsePort(v)
		o.SecurePort = &p
		return portAllowed, ok
	},
	v1alpha1.AnnotationHealthPort: func(o *Overrides, v string) (string, bool) {
		p, ok := parsePort(v)
		o.HealthPort = &p
		return portAllowed, ok
	},
	v1alpha1.AnnotationPreStopSleep: func(o *Overrides, v string) (string, bool) {
		n, err := strconv.ParseInt(v, 10, 32)
		s := int32(n)
		o.PreStopSleep = &s
		return fmt.Sprintf("whole seconds from 0 to %d (0 disables the injected preStop)", maxPreStopSleepSeconds),
			err == nil && n >= 0 && n <= maxPreStopSleepSeconds
	},
	v1alpha1.AnnotationProtocol: func(o *Overrides, v string) (string, bool) {
		p := v1alpha1.Protocol(strings.ToUpper(v))
		o.Protocol = p
		return `"HTTP" or "TCP"`, p == v1alpha1.ProtocolHTTP || p == v1alpha1.ProtocolTCP
	},
	v1alpha1.AnnotationManagementPort: func(o *Overrides, v string) (string, bool) {
		p, ok := parsePort(v)
		o.ManagementPort = &p
		return portAllowed, ok
	},
	v1alpha1.AnnotationManagementPath: func(o *Overrides, v string) (string, bool) {
		o.ManagementPath = v
		return fmt.Sprintf("an absolute URL path starting with '/', such as /actuator, without spaces, control characters, '?' or '#', at most %d characters", maxHealthPathLength),
			validHealthPath(v) && sidecar.ValidManagementBasePath(v)
	},
	v1alpha1.AnnotationHealthType: func(o *Overrides, v string) (string, bool) {
		t := v1alpha1.HealthCheckType(strings.ToUpper(v))
		o.HealthType = t
		return `"HTTP" or "TCP"`, t == v1alpha1.HealthCheckHTTP || t == v1alpha1.HealthCheckTCP
	},
	v1alpha1.AnnotationHealthScheme: func(o *Overrides, v string) (string, bool) {
		s := strings.ToUpper(v)
		o.HealthScheme = s
		return `"HTTP" or "HTTPS"`, s == "HTTP" || s == "HTTPS"
	},
	v1alpha1.AnnotationHealthPath: func(o *Overrides, v string) (string, bool) {
		o.HealthPath = v
		return fmt.Sprintf("an absolute URL path starting with '/', without spaces or control characters, at most %d characters", maxHealthPathLength),
			validHealthPath(v)
	},
	v1alpha1.AnnotationSidecarCPU: func(o *Overrides, v string) (string, bool) {
		q, ok := parsePositiveQuantity(v)
		o.SidecarCPU = q
		return `a positive Kubernetes quantity such as "50m" or "0.1" (sets the registrar's CPU request and limit)`, ok
	},
	v1alpha1.AnnotationSidecarMemory: func(o *Overrides, v string) (string, bool) {
		q, ok := parsePositiveQuantity(v)
		o.SidecarMemory = q
		return `a positive Kubernetes quantity such as "32Mi" (sets the registrar's memory request and limit)`, ok
	},
}

const (
	vipAllowed  = "a VIP address of letters, digits, '.', '_', ',' and '-', starting and ending with a letter or digit, at most 253 characters"
	portAllowed = "a port number from 1 to 65535 or a container port name (lower-case letters, digits and '-', at most 15 characters)"
)

// ParseAnnotations parses and validates every eurekube.io/ annotation. An
// unknown eurekube.io/ key is an error, so a typo never passes silently.
// The error is AnnotationErrors, naming every bad annotation.
func ParseAnnotations(annotations map[string]string) (Overrides, error) {
	var o Overrides
	var errs AnnotationErrors
	for key, value := range annotations {
		if !strings.HasPrefix(key, v1alpha1.AnnotationPrefix) {
			continue
		}
		if metadataKey, ok := strings.CutPrefix(key, v1alpha1.AnnotationMetadataPrefix); ok {
			if allowed, ok := validMetadata(metadataKey, value); !ok {
				errs = append(errs, &AnnotationError{Key: key, Value: value, Allowed: allowed})
				continue
			}
			if o.Metadata == nil {
				o.Metadata = map[string]string{}
			}
			o.Metadata[metadataKey] = value
			continue
		}
		parse, known := annotationParsers[key]
		if !known {
			errs = append(errs, &AnnotationError{Key: key, Value: value, Allowed: "no such annotation; known: " + knownAnnotations()})
			continue
		}
		if allowed, ok := parse(&o, value); !ok {
			errs = append(errs, &AnnotationError{Key: key, Value: value, Allowed: allowed})
		}
	}
	if o.HealthType == v1alpha1.HealthCheckTCP && (o.HealthPath != "" || o.HealthScheme != "") {
		value := annotations[v1alpha1.AnnotationHealthType]
		errs = append(errs, &AnnotationError{Key: v1alpha1.AnnotationHealthType, Value: value,
			Allowed: fmt.Sprintf(`"HTTP" when %s or %s is set (a TCP check has no path or scheme)`, v1alpha1.AnnotationHealthPath, v1alpha1.AnnotationHealthScheme)})
	}
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Key < errs[j].Key })
		return Overrides{}, errs
	}
	return o, nil
}

// knownAnnotations lists the accepted keys for the error of an unknown one.
func knownAnnotations() string {
	keys := make([]string, 0, len(annotationParsers)+1)
	for k := range annotationParsers {
		keys = append(keys, k)
	}
	keys = append(keys, v1alpha1.AnnotationMetadataPrefix+"<key>")
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func parseBool(v string) (bool, bool) {
	switch v {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// parsePort accepts what a Service's targetPort accepts: a number or an
// IANA service name.
func parsePort(v string) (intstr.IntOrString, bool) {
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		return intstr.FromInt32(int32(n)), n >= 1 && n <= 65535
	}
	return intstr.FromString(v), len(validation.IsValidPortName(v)) == 0
}

func validVIP(v string) bool {
	return len(v) <= maxVIPAddressLength && vipAddressPattern.MatchString(v)
}

func validHealthPath(v string) bool {
	if !strings.HasPrefix(v, "/") || len(v) > maxHealthPathLength {
		return false
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

func parsePositiveQuantity(v string) (*resource.Quantity, bool) {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() <= 0 {
		return nil, false
	}
	return &q, true
}

// validMetadata applies the CRD's rules for spec.metadata to one
// eurekube.io/metadata.<key> annotation.
func validMetadata(key, value string) (string, bool) {
	if !metadataKeyPattern.MatchString(key) || len(key) > maxMetadataKeyLength {
		return fmt.Sprintf("a key after %s that starts with a letter or '_' and holds only letters, digits, '_', '.' and '-' (at most %d characters)",
			v1alpha1.AnnotationMetadataPrefix, maxMetadataKeyLength), false
	}
	if len(value) > maxMetadataValueLength {
		return fmt.Sprintf("a metadata value of at most %d characters", maxMetadataValueLength), false
	}
	return "", true
}
