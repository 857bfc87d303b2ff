package selfmanaged

import (
	"testing"
	"time"
)

var testPolicy = policy{
	DNSNames:        []string{"eurekube-webhook.eurekube-system.svc", "eurekube-webhook.eurekube-system.svc.cluster.local"},
	CAValidity:      90 * time.Minute,
	ServingValidity: 30 * time.Minute,
	TrustDelay:      time.Minute,
}

func mustPlan(t *testing.T, m material, now time.Time, trusted bool) planResult {
	t.Helper()
	res, err := plan(m, now, testPolicy, trusted)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func reasons(res planResult) []string {
	var out []string
	for _, c := range res.changes {
		out = append(out, c.Reason)
	}
	return out
}

func sameReasons(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// issued is the material of a first plan, and when it was made.
func issued(t *testing.T) (material, time.Time) {
	t.Helper()
	now := time.Now()
	res := mustPlan(t, material{}, now, false)
	if !sameReasons(reasons(res), ReasonCAIssued, ReasonServingIssued) {
		t.Fatalf("first plan: %v, want a CA and a serving certificate issued", reasons(res))
	}
	return res.next, now
}

func TestPlan_AnEmptySecretGetsACAAndAServingCertificateItSigned(t *testing.T) {
	m, now := issued(t)
	if len(m.bundle) != 1 || !m.bundle[0].Equal(m.ca.Cert) {
		t.Fatalf("bundle holds %d certificates, want the CA alone", len(m.bundle))
	}
	if !m.servingSignedByCA() {
		t.Fatal("the serving certificate is not signed by the CA")
	}
	if !sameNames(m.serving.Cert.DNSNames, testPolicy.DNSNames) {
		t.Fatalf("serving certificate for %v, want %v", m.serving.Cert.DNSNames, testPolicy.DNSNames)
	}
	again := mustPlan(t, m, now, true)
	if len(again.changes) != 0 {
		t.Fatalf("a fresh Secret is changed again: %v", reasons(again))
	}
	wantRecheck := m.serving.Cert.NotAfter.Add(-testPolicy.ServingValidity / 3)
	if !again.recheck.Equal(wantRecheck) {
		t.Fatalf("recheck at %s, want the serving certificate's renewal at %s", again.recheck, wantRecheck)
	}
}

func TestPlan_RenewsTheServingCertificateOnceAThirdOfItsValidityRemains(t *testing.T) {
	m, now := issued(t)
	if res := mustPlan(t, m, now.Add(19*time.Minute), true); len(res.changes) != 0 {
		t.Fatalf("renewed with 11 of 30 minutes left: %v", reasons(res))
	}
	res := mustPlan(t, m, now.Add(21*time.Minute), true)
	if !sameReasons(reasons(res), ReasonServingRotated) {
		t.Fatalf("with 9 of 30 minutes left: %v, want the serving certificate rotated", reasons(res))
	}
	if res.next.serving.Cert.SerialNumber.Cmp(m.serving.Cert.SerialNumber) == 0 || !res.next.ca.Cert.Equal(m.ca.Cert) {
		t.Fatal("want a new serving certificate under the same CA")
	}
}

func TestPlan_ReissuesACertificateForOtherHosts(t *testing.T) {
	m, now := issued(t)
	p := testPolicy
	p.DNSNames = []string{"other.eurekube-system.svc"}
	res, err := plan(m, now, p, true)
	if err != nil {
		t.Fatal(err)
	}
	if !sameReasons(reasons(res), ReasonServingRotated) || res.next.serving.Cert.DNSNames[0] != "other.eurekube-system.svc" {
		t.Fatalf("after the Service changed: %v", reasons(res))
	}
}

// A CA rotation, step by step: clients must trust the new CA before any
// replica serves a certificate it signed, and keep trusting the old one
// until nothing it signed can be served. Certificates are issued on the
// real clock, so the old CA is a short-lived one (30 minutes) and the
// plan runs at later instants.
func TestPlan_RotatesTheCAWithAnOverlapInTheBundle(t *testing.T) {
	start := time.Now()
	short := testPolicy
	short.CAValidity = 30 * time.Minute
	first, err := plan(material{}, start, short, false)
	if err != nil {
		t.Fatal(err)
	}
	m := first.next
	at := func(d time.Duration) time.Time { return start.Add(d) }

	// 21 of 30 minutes: a new CA joins the bundle; the serving
	// certificate, due too, stays while no client trusts the new CA.
	res := mustPlan(t, m, at(21*time.Minute), true)
	if !sameReasons(reasons(res), ReasonCARotationStarted) {
		t.Fatalf("CA with less than a third of its validity left: %v, want a CA rotation started", reasons(res))
	}
	rotating := res.next
	if len(rotating.bundle) != 2 || !rotating.bundle[0].Equal(rotating.ca.Cert) || !rotating.bundle[1].Equal(m.ca.Cert) {
		t.Fatal("want the bundle to hold the new CA, then the old one")
	}
	if !rotating.serving.Cert.Equal(m.serving.Cert) {
		t.Fatal("the serving certificate changed before clients trust the new CA")
	}

	// The webhook configuration does not hold the new CA yet.
	if res := mustPlan(t, rotating, at(22*time.Minute), false); len(res.changes) != 0 {
		t.Fatalf("changed while the caBundle lacks the new CA: %v", reasons(res))
	}
	// It does, but the trust delay has not passed.
	trustedAt := rotating.ca.Cert.NotBefore.Add(testPolicy.TrustDelay)
	res = mustPlan(t, rotating, trustedAt.Add(-time.Second), true)
	if len(res.changes) != 0 {
		t.Fatalf("changed within the trust delay: %v", reasons(res))
	}
	if !res.recheck.Equal(trustedAt) {
		t.Fatalf("recheck at %s, want the end of the trust delay %s", res.recheck, trustedAt)
	}
	// Trusted: the new CA signs the serving certificate; the old CA stays.
	res = mustPlan(t, rotating, at(22*time.Minute), true)
	if !sameReasons(reasons(res), ReasonServingRotated) || !res.next.servingSignedByCA() {
		t.Fatalf("once trusted: %v, want a serving certificate by the new CA", reasons(res))
	}
	if len(res.next.bundle) != 2 {
		t.Fatal("the old CA left the bundle while replicas may serve what it signed")
	}
	if res.recheck.After(m.ca.Cert.NotAfter) {
		t.Fatalf("recheck at %s, after the old CA expires at %s", res.recheck, m.ca.Cert.NotAfter)
	}

	// The old CA expired: it leaves the bundle.
	res = mustPlan(t, res.next, m.ca.Cert.NotAfter, true)
	retired := false
	for _, r := range reasons(res) {
		retired = retired || r == ReasonCARetired
	}
	if !retired || len(res.next.bundle) != 1 || !res.next.bundle[0].Equal(rotating.ca.Cert) {
		t.Fatalf("after the old CA expired: %v, bundle of %d, want the new CA alone", reasons(res), len(res.next.bundle))
	}
}

func TestPlan_ReplacesAnUnusableSecret(t *testing.T) {
	m, now := issued(t)
	data, err := m.secretData()
	if err != nil {
		t.Fatal(err)
	}
	data["ca.key"] = []byte("garbage")
	damaged := parseSecret(data)
	if damaged.ca != nil || len(damaged.problems) == 0 {
		t.Fatal("a garbage CA key was taken")
	}
	res := mustPlan(t, damaged, now, true)
	if len(res.changes) == 0 || res.next.ca == nil || res.next.serving == nil {
		t.Fatalf("damaged Secret: %v, want a new CA", reasons(res))
	}
	if len(res.next.bundle) != 2 {
		t.Fatal("the old CA left the bundle while replicas serve what it signed")
	}
}

func TestSecretData_RoundTrips(t *testing.T) {
	m, _ := issued(t)
	data, err := m.secretData()
	if err != nil {
		t.Fatal(err)
	}
	back := parseSecret(data)
	if len(back.problems) > 0 || !back.ca.Cert.Equal(m.ca.Cert) || !back.serving.Cert.Equal(m.serving.Cert) {
		t.Fatalf("the Secret's data does not read back: %v", back.problems)
	}
}
