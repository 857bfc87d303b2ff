package admission

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
)

// The real API server admits a serviceURL exactly when eureka.CheckServerURL
// (the rule of --eureka-url, the registrar and the client) accepts it, over
// a product of URL parts: credentials are refused wherever they stand in
// the authority, pointing to the Secret and never echoing the password; an
// '@' in the path, query or fragment is not. (eureka's FuzzServerURL_*
// drives many more URLs through the same CEL code in process.)
func TestSyncer_ServiceURLsAreAdmittedExactlyWhenTheGoRuleAcceptsThem(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(ctx, t, "serviceurls", nil)
	var urls []string
	for _, scheme := range []string{"http://", "HTTPS://", "ftp://", "http:"} {
		for _, userinfo := range []string{"", "ledger:s3cret@", "ledger@", ":s3cret@", "@", "led%40ger:s3%3Acret@"} {
			for _, host := range []string{"eureka:8761", "[::1]:8761", ":8761", ""} {
				for _, rest := range []string{"", "/eureka/team@ledger", "?owner=ops@example", "#a:b@c", "/a,b"} {
					urls = append(urls, scheme+userinfo+host+rest)
				}
			}
		}
	}
	for _, u := range urls {
		s := builders.Syncer(ns, "ledger", builders.EurekaURLs(u))
		apiErr := suite.c.Create(ctx, s, client.DryRunAll)
		goErr := eureka.CheckServerURL(u)
		if (apiErr == nil) != (goErr == nil) {
			t.Errorf("serviceURL %q: the API server says %v, CheckServerURL says %v", u, apiErr, goErr)
			continue
		}
		if apiErr != nil && strings.Contains(apiErr.Error(), "s3cret") {
			t.Errorf("serviceURL %q: the refusal echoes the password: %v", u, apiErr)
		}
		if errors.Is(goErr, eureka.ErrCredentialsInURL) && !strings.Contains(apiErr.Error(), "spec.eureka.credentialsSecretRef") {
			t.Errorf("serviceURL %q: refused with %v, want it to point to spec.eureka.credentialsSecretRef", u, apiErr)
		}
	}
}
