// Package selfmanaged gives the manager's webhook its certificates where
// cert-manager does not run (--certificate-mode=self-managed): the elected
// leader issues and rotates a CA and a serving certificate in one Secret
// and keeps the webhook configuration's caBundle current; every replica
// serves the Secret's current key pair.
//
// Decisions written down here:
//   - One Secret (--certificate-secret, in the manager's namespace) holds
//     everything, in cert-manager's layout plus the CA key: tls.crt and
//     tls.key (the serving key pair), ca.crt (the caBundle: the current CA
//     first, then the previous one while a CA rotation overlaps) and
//     ca.key (the current CA's key). The caBundle of every webhook of
//     --webhook-configuration is ca.crt, byte for byte.
//   - Only the leader writes (Issuer, a leader-election runnable). Writes
//     are conditional: the Secret is created, or updated at the
//     resourceVersion it was read at; the caBundle is set by a JSON patch
//     that first tests the configuration's resourceVersion. A leader that
//     read before its predecessor's last write fails, re-reads and plans
//     again, so two leaders in succession never undo each other.
//   - Every decision is the pure function plan (the Secret's parsed
//     content and the time in, the next content and when to look again
//     out); Issuer only reads, calls plan, writes and reports. It runs on
//     every change of the Secret or of the webhook configuration (one
//     watched object each, by a field selector on its name, so RBAC can
//     name them), and when plan's next renewal is due.
//   - A certificate is renewed once less than a third of its validity
//     remains (cert-manager's default). The serving certificate lives 30
//     days, the CA a year; a serving certificate never outlives its CA.
//   - CA rotation keeps every handshake valid: a client (the API server)
//     must trust a CA before any replica serves a certificate it signed,
//     and keep trusting the old CA while any replica may still serve a
//     certificate the old CA signed. So:
//     1. the new CA joins ca.crt first, the serving certificate unchanged
//     (still by the old CA), and the caBundle is patched to both;
//     2. only when the caBundle read back holds the new CA, and the CA is
//     older than the trust delay (a minute: the API server reads webhook
//     configurations through an informer), does the new CA sign a serving
//     certificate; replicas pick it up from their watch at their own pace,
//     each serving either certificate, both trusted;
//     3. the old CA leaves ca.crt and the caBundle when it expires. Every
//     certificate it signed expires by then (none outlives its CA), so no
//     replica can still serve a valid one: from then on every working
//     replica serves a certificate of the new CA. This needs no report
//     from the replicas (which would need writes from non-leaders, or
//     access to every replica's endpoint); the cost is an expired-soon CA
//     in the bundle for the last third of its life, whose key is already
//     discarded.
//     A Secret lost or damaged beyond use gets a new CA at once; the CAs
//     of its ca.crt stay while valid, since replicas may serve what they
//     signed.
//   - The webhook configuration owns the Secret (an owner reference, set
//     on creation and added, best effort, to a Secret without it), so
//     deleting it at uninstall lets the garbage collector delete the
//     Secret and its CA key; no manifest names the Secret. Adding an owner
//     later needs delete on the Secret where
//     OwnerReferencesPermissionEnforcement runs (OpenShift), which the
//     manager is not granted: there a Secret of an older version stays
//     unowned, said once in the log. Without the configuration the leader
//     issues nothing: uninstalling deletes it while the leader still runs,
//     and a Secret issued then would be left behind.
//   - Every replica (Served) watches the Secret through a namespaced
//     informer on that one name (the manager's cache never holds Secrets)
//     and answers the webhook server's tls.Config.GetCertificate with the
//     latest key pair it read. Until there is one, handshakes fail, so
//     /readyz (which dials the webhook server) fails too. A deleted Secret
//     leaves the last key pair served until the leader writes a new one.
package selfmanaged
