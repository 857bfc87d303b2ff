package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// A condition written by a manager from before the CRD refused credentials
// in URLs may quote one with its password: check and uninstall print it
// redacted.
func TestCheckAndUninstall_PrintNoPasswordAnOlderManagerWrote(t *testing.T) {
	s := syncerWith("orders", metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionFalse, Reason: "EurekaUnreachable",
		Message: `heartbeat ORDERS/orders-1: PUT http://orders:s3cret@eureka:8761/eureka/apps/ORDERS/orders-1: connection refused`})
	var out strings.Builder
	printFindings(&out, evaluateEureka([]v1alpha1.EurekaSyncer{s}))
	reportLeft(&out, departingKinds, map[string][]departed{"EurekaSyncer": {{&s, s.Status.Conditions}}}, time.Minute)
	if strings.Contains(out.String(), "s3cret") || strings.Count(out.String(), "PUT http://orders:xxxxx@eureka:8761/eureka/apps/ORDERS/orders-1") != 2 {
		t.Errorf("want the URL redacted in both, got:\n%s", out.String())
	}
}
