package bench

import "testing"

func TestClassify_NamesEachEurekaRequest(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/eureka/apps/", KindFetchFull},
		{"GET", "/eureka/apps", KindFetchFull},
		{"GET", "/eureka/apps/delta", KindFetchDelta},
		{"GET", "/eureka/apps/ORDERS", KindReadApp},
		{"GET", "/eureka/apps/ORDERS/pod-1.shop.3f2a9c1e:orders:8080", KindReadInstance},
		{"POST", "/eureka/apps/ORDERS", KindRegister},
		{"PUT", "/eureka/apps/ORDERS/pod-1.shop.3f2a9c1e:orders:8080", KindHeartbeat},
		{"PUT", "/eureka/apps/ORDERS/pod-1.shop.3f2a9c1e:orders:8080/status", KindStatus},
		{"DELETE", "/eureka/apps/ORDERS/pod-1.shop.3f2a9c1e:orders:8080", KindCancel},
		{"GET", "/actuator/health", KindOther},
	} {
		if got := Classify(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}
