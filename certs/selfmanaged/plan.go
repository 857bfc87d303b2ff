package selfmanaged

import (
	"crypto/x509"
	"slices"
	"time"

	"github.com/eurekube/eurekube/certs"
)

// Reasons of a change, used as the Event reason and the log message's key.
const (
	ReasonCAIssued          = "CAIssued"
	ReasonCARotationStarted = "CARotationStarted"
	ReasonCARetired         = "CARetired"
	ReasonServingIssued     = "CertificateIssued"
	ReasonServingRotated    = "CertificateRotated"
)

// change is one thing a plan did to the Secret.
type change struct {
	Reason string
	// Message says what and why, for the Event and the log.
	Message string
}

// policy is what a plan follows.
type policy struct {
	DNSNames        []string
	CAValidity      time.Duration
	ServingValidity time.Duration
	// TrustDelay is how long a new CA sits in the caBundle before a
	// serving certificate it signed is served.
	TrustDelay time.Duration
}

// planResult is what plan decided.
type planResult struct {
	// next is the material to store, the same value when nothing changed.
	next    material
	changes []change
	// recheck is when the plan may decide something else with the same
	// input: a renewal, the end of a trust delay, a CA to retire.
	recheck time.Time
}

// plan decides the Secret's next material from its current one at now.
// caTrusted says whether the webhook configuration's caBundle already
// holds the current CA (true when there is no webhook configuration: no
// client calls the webhook through it).
//
// The order of a CA rotation (see the package doc): the new CA joins the
// bundle first; a serving certificate it signed is stored only once the
// caBundle holds it and TrustDelay passed; the old CA leaves the bundle
// only when it expires, by when every certificate it signed has expired.
func plan(cur material, now time.Time, p policy, caTrusted bool) (planResult, error) {
	next := cur
	next.bundle = slices.Clone(cur.bundle)
	var changes []change

	switch {
	case cur.ca == nil || !now.Before(cur.ca.Cert.NotAfter):
		ca, err := certs.NewCA(caCommonName, p.CAValidity)
		if err != nil {
			return planResult{}, err
		}
		next.ca = ca
		// CAs of a damaged Secret stay while they are valid: replicas may
		// still serve what they signed.
		next.bundle = append([]*x509.Certificate{ca.Cert}, unexpired(cur.bundle, now)...)
		changes = append(changes, change{ReasonCAIssued, "issued CA " + describe(ca.Cert) + ", valid until " + stamp(ca.Cert.NotAfter)})
	case !now.Before(certs.RenewAt(cur.ca.Cert)):
		ca, err := certs.NewCA(caCommonName, p.CAValidity)
		if err != nil {
			return planResult{}, err
		}
		next.ca = ca
		next.bundle = append([]*x509.Certificate{ca.Cert}, cur.bundle...)
		changes = append(changes, change{ReasonCARotationStarted, "CA " + describe(cur.ca.Cert) + " expires at " + stamp(cur.ca.Cert.NotAfter) +
			": new CA " + describe(ca.Cert) + " joins the caBundle; serving certificates it signs follow once the caBundle holds it"})
	}

	recheck := certs.RenewAt(next.ca.Cert)
	trustedAt := next.ca.Cert.NotBefore.Add(p.TrustDelay)
	reason, why := servingDue(next, now, p.DNSNames)
	if reason != "" {
		// A certificate of the new CA waits until clients trust it, unless
		// there is no usable certificate to protect.
		usable := next.serving != nil && now.Before(next.serving.Cert.NotAfter)
		// caTrusted speaks of the CA read, not of one made just now.
		trusted := caTrusted && len(changes) == 0 && !now.Before(trustedAt)
		if !next.servingSignedByCA() && usable && !trusted {
			if caTrusted && len(changes) == 0 {
				recheck = earliest(recheck, trustedAt)
			}
		} else {
			s, err := next.ca.Issue(certs.ServingOptions{DNSNames: p.DNSNames, Validity: p.ServingValidity})
			if err != nil {
				return planResult{}, err
			}
			next.serving = s
			changes = append(changes, change{reason, why + ": issued " + describe(s.Cert) + " by CA " + describe(next.ca.Cert) + ", valid until " + stamp(s.Cert.NotAfter)})
		}
	}
	if next.serving != nil {
		recheck = earliest(recheck, certs.RenewAt(next.serving.Cert))
	}

	kept := next.bundle[:1]
	for _, c := range next.bundle[1:] {
		switch {
		case !now.Before(c.NotAfter):
			changes = append(changes, change{ReasonCARetired, "CA " + describe(c) + " expired at " + stamp(c.NotAfter) + ": removed from the caBundle"})
		case slices.ContainsFunc(kept, c.Equal):
		default:
			kept = append(kept, c)
			recheck = earliest(recheck, c.NotAfter)
		}
	}
	next.bundle = kept
	return planResult{next: next, changes: changes, recheck: recheck}, nil
}

// servingDue says why a new serving certificate is needed, "" when none is.
func servingDue(m material, now time.Time, dnsNames []string) (reason, why string) {
	switch {
	case m.serving == nil:
		return ReasonServingIssued, "no serving certificate"
	case !m.servingSignedByCA():
		return ReasonServingRotated, "serving certificate " + describe(m.serving.Cert) + " is not signed by the current CA"
	case !now.Before(certs.RenewAt(m.serving.Cert)):
		return ReasonServingRotated, "serving certificate " + describe(m.serving.Cert) + " expires at " + stamp(m.serving.Cert.NotAfter)
	case !sameNames(m.serving.Cert.DNSNames, dnsNames):
		return ReasonServingRotated, "serving certificate " + describe(m.serving.Cert) + " names other hosts than the webhook Service"
	}
	return "", ""
}

func unexpired(cas []*x509.Certificate, now time.Time) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range cas {
		if now.Before(c.NotAfter) {
			out = append(out, c)
		}
	}
	return out
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
