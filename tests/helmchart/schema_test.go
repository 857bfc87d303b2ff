package helmchart

import (
	"strings"
	"testing"
)

func TestSchema_RejectsBadValuesNamingTheField(t *testing.T) {
	cases := []struct {
		values, field string
	}{
		{"manager: {replicas: -1}", "/manager/replicas"},
		{"manager: {replicas: 0}", "/manager/replicas"},
		{"certificates: {mode: foo}", "/certificates/mode"},
		{"webhook: {failurePolicy: Maybe}", "/webhook/failurePolicy"},
		{"webhook: {timeoutSeconds: 31}", "/webhook/timeoutSeconds"},
		{"manager: {defaultDrainSeconds: 3601}", "/manager/defaultDrainSeconds"},
		{"manager: {eurekaURLs: [eureka:8761]}", "/manager/eurekaURLs/0"},
		{"manager: {allowedRegistrarImages: ['a b']}", "/manager/allowedRegistrarImages/0"},
		{"manager: {allowedEurekaHosts: ['http://eureka:8761']}", "/manager/allowedEurekaHosts/0"},
		{"manager: {resyncPeriod: 30}", "/manager/resyncPeriod"},
		{"manager: {logLevel: verbose}", "/manager/logLevel"},
		{"manager: {image: {digest: latest}}", "/manager/image/digest"},
		{"credentialsNamespaces: [Shop]", "/credentialsNamespaces/0"},
		{"uninstall: {timeout: forever}", "/uninstall/timeout"},
		{"gateway: {mode: permissive}", "/gateway/mode"},
		{"gateway: {replicas: 0}", "/gateway/replicas"},
		{"gateway: {eurekaURLs: [eureka:8761]}", "/gateway/eurekaURLs/0"},
		{"gateway: {readTTL: 5}", "/gateway/readTTL"},
		{"gateway: {eurekaCredentials: {secretName: Eureka_Login}}", "/gateway/eurekaCredentials/secretName"},
		{"gateway: {enforce: true}", "enforce"},
		// A typo is an error, not a silently ignored value.
		{"manager: {replica: 3}", "replica"},
	}
	for _, c := range cases {
		t.Run(c.values, func(t *testing.T) {
			_, err := helmTemplate(t, releaseNamespace, c.values)
			if err == nil {
				t.Fatalf("helm template accepted %q", c.values)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("the error does not name %s:\n%v", c.field, err)
			}
		})
	}
}
