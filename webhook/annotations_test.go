package webhook

import (
	"strings"
	"testing"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestParseAnnotations_AcceptsEveryDocumentedOverride(t *testing.T) {
	o, err := ParseAnnotations(map[string]string{
		v1alpha1.AnnotationAppName:                   "orders-v2",
		v1alpha1.AnnotationPort:                      "8081",
		v1alpha1.AnnotationPreStopSleep:              "20",
		v1alpha1.AnnotationHealthPath:                "/ready",
		v1alpha1.AnnotationSidecarCPU:                "50m",
		v1alpha1.AnnotationSidecarMemory:             "48Mi",
		v1alpha1.AnnotationMetadataPrefix + "zone":   "zone-b",
		v1alpha1.AnnotationMetadataPrefix + "canary": "true",
		"unrelated.example/annotation":               "anything",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.AppName != "orders-v2" || o.PreStopSleep == nil || *o.PreStopSleep != 20 || o.Metadata["zone"] != "zone-b" || o.Metadata["canary"] != "true" {
		t.Fatalf("overrides = %+v", o)
	}
}

func TestParseAnnotations_DeniesBadValuesNamingKeyValueAndAllowed(t *testing.T) {
	for _, tc := range []struct {
		key, value, allowed string
	}{
		{v1alpha1.AnnotationPort, "0", "1 to 65535"},
		{v1alpha1.AnnotationPort, "Not_A_Name", "port name"},
		{v1alpha1.AnnotationPreStopSleep, "-1", ""},
		{v1alpha1.AnnotationPreStopSleep, "ten", ""},
		{v1alpha1.AnnotationAppName, "-orders", "letters"},
		{v1alpha1.AnnotationHealthPath, "ready", "/"},
		{v1alpha1.AnnotationSidecarMemory, "lots", ""},
		{v1alpha1.AnnotationInject, "maybe", "true"},
		{v1alpha1.AnnotationMetadataPrefix + "bad key", "v", ""},
		{v1alpha1.AnnotationPrefix + "app-nmae", "orders", "no such annotation"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			_, err := ParseAnnotations(map[string]string{tc.key: tc.value})
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.key) || !strings.Contains(msg, tc.value) || !strings.Contains(msg, tc.allowed) {
				t.Fatalf("error %q does not name the key, the value and %q", msg, tc.allowed)
			}
		})
	}
}

func TestParseAnnotations_BadManagementAndProtocolValuesSayWhy(t *testing.T) {
	_, err := ParseAnnotations(map[string]string{
		v1alpha1.AnnotationProtocol:       "udp",
		v1alpha1.AnnotationManagementPort: "70000",
		v1alpha1.AnnotationManagementPath: "actuator",
	})
	for _, want := range []string{
		`annotation eurekube.io/management-base-path: invalid value "actuator": an absolute URL path starting with '/'`,
		`annotation eurekube.io/management-port: invalid value "70000": a port number from 1 to 65535`,
		`annotation eurekube.io/protocol: invalid value "udp": "HTTP" or "TCP"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to say %s", err, want)
		}
	}
}
