package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
	"github.com/eurekube/eurekube/webhook"
)

// Issue 43's measurement on the node: Eurekube's gateway enforcing in
// front of Eureka servers that take nothing, not even a read, without the
// basic-auth credentials that only the gateway holds. Everything else
// reaches Eureka through the gateway with an identity: the registrars with
// their pods' projected tokens (the webhook mounts them, as the manager's
// --eureka-url names the gateway), the manager with its own token, a VM
// with the credentials of a Secret an EurekaAppPolicy binds to its app. A
// real Spring client reads through the gateway and calls WALLET by name
// the whole time, and none of its calls fails once one has succeeded:
//
//  1. a rogue pod of a namespace that never opted in, running a copy of the
//     registrar's image as WALLET with its own valid token for the
//     gateway's audience, is refused (the gateway's Event on the pod names
//     the ownership rule), and at Eureka directly gets 401;
//  2. a VM with WALLET's credentials registers and is called; a VM with
//     another app's credentials is refused;
//  3. a rollout, then a Standby → Serve cut-over (the manager's status
//     overrides through the gateway);
//  4. a rollout during which a gateway replica is deleted with grace 0;
//
// and Eureka never lists the rogue pod or the refused VM.
//
// The story has Eureka servers of its own (two peers, replicating with the
// credentials) and points the installed gateway at them, enforcing, for
// its length: nothing else in the suite names the gateway. The suite's
// timings are shortened in step (doc.go), the gateway's shared read copy
// to a second, so the pods drain for two seconds more than the suite's.
func TestGateway_EnforcingInFrontOfLockedEureka_NoCallFails(t *testing.T) {
	story(t, 330*time.Second)
	g := startGatewayStory(t)

	t.Run("RoguePodRefusedByTheGatewayAndByEureka", g.roguePod)
	t.Run("VMWritesByItsAppsCredentialsOnly", g.vms)
	t.Run("RolloutAndStandbyServeCutOverThroughTheGateway_NoCallFails", g.rolloutAndCutOver)
	t.Run("GatewayReplicaKilledMidRollout_NoCallFails", g.replicaKilled)

	total := g.sc.StatsT(t).Since(g.firstOK)
	// The client stops calling before the VM it calls stops (the
	// subtests' cleanups).
	g.calls.stop()
	_ = g.sc.Stop()
	t.Logf("the Spring client through the gateway: %d calls since its first success, %d failed; answered by %v", total.OK+total.Failed, total.Failed, total.ByInstance)
	if total.Failed != 0 {
		t.Errorf("%d of %d calls failed after the first succeeded; last: %s (every failure: %s)", total.Failed, total.OK+total.Failed, total.LastError, g.calls.path)
	}
	if seen := g.sentinel.stop(); len(seen) > 0 {
		t.Errorf("Eureka listed what the gateway must refuse:\n%s", strings.Join(seen, "\n"))
	} else {
		t.Logf("Eureka listed neither the rogue pod nor the refused VM in %d reads of both peers", g.sentinel.reads())
	}
}

const (
	gwNamespace    = "gw-wallet"
	gwApp          = "wallet"
	gwRogueNS      = "gw-rogue"
	gwRoguePod     = "wallet-impostor"
	gwVMSecret     = "wallet-vm"
	gwOtherSecret  = "invoices-vm"
	gwOtherApp     = "INVOICES"
	gwReadTTL      = time.Second
	gwDrainSeconds = drainSeconds + 2
)

// gatewayStory is what the gateway story's parts share.
type gatewayStory struct {
	t     *testing.T
	dir   string // logs kept after the run
	peers *harness.EurekaPeers
	// read is the peer the story reads through: the last, which the
	// gateway writes to only while the first is down.
	read    *harness.Eureka
	hostURL string // the gateway's URL for clients on the host
	app     cluster.App
	sc      *harness.SpringClient
	// firstOK is the client's stats when its first call succeeded.
	firstOK  harness.SpringStats
	calls    *callLog
	sentinel *sentinel
	vm1      *harness.SpringClient
}

func startGatewayStory(t *testing.T) *gatewayStory {
	t.Helper()
	ctx := context.Background()
	g := &gatewayStory{t: t, dir: filepath.Join(c.LogDir, "gateway", strings.ReplaceAll(t.Name(), "/", "_"))}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	auth := &harness.EurekaAuth{Username: "eurekube-gateway", Password: password(t)}
	g.peers = harness.EurekaPeersT(t, harness.EurekaOptions{Host: node.NodeIP, Auth: auth, LogDir: filepath.Join(g.dir, "eureka")}, 2)
	g.read = g.peers.Servers[len(g.peers.Servers)-1]

	restore, err := c.EnforceGateway(ctx, cluster.GatewayOptions{EurekaURLs: g.peers.URLs(), Auth: auth, ReadTTL: gwReadTTL})
	if restore != nil {
		// After the namespaces are gone (below): their pods cancel and the
		// syncer detaches through the gateway.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			if err := restore(ctx); err != nil {
				t.Errorf("restore the gateway as installed: %v", err)
			} else if err := c.WaitGatewayRolledOut(ctx); err != nil {
				t.Errorf("restore the gateway as installed: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if g.hostURL, err = c.GatewayHostURL(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ns := range []string{gwNamespace, gwRogueNS} {
			dropNamespace(t, ns)
		}
		for _, ns := range []string{gwNamespace, gwRogueNS} {
			waitNamespaceGone(t, ns)
		}
	})
	g.sentinel = watchNeverListed(g.peers, strings.ToUpper(gwApp))
	t.Cleanup(func() { g.sentinel.stop() })

	g.app = cluster.App{Namespace: gwNamespace, Name: gwApp, Replicas: 2, DrainSeconds: ptr.To[int32](gwDrainSeconds),
		EurekaURLs: []string{cluster.GatewayURL}}
	deploy(t, g.app, nil)
	began := time.Now()
	v := settleAt(t, g.app, g.read, 3*time.Minute)
	t.Logf("Eureka, which only the gateway may write to, lists both pods UP %s after the Deployment was created", time.Since(began).Round(time.Second))
	for _, p := range v.Pods {
		if !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == webhook.GatewayTokenVolume }) {
			t.Fatalf("pod %s has no volume %s: the webhook gave its registrar no token for the gateway", p.Name, webhook.GatewayTokenVolume)
		}
	}

	g.sc = startGatewayClient(t, g.hostURL, g.dir)
	g.calls = logCalls(t, g.sc, filepath.Join(g.dir, "failed-calls.txt"))
	g.firstOK = g.calls.waitFirstOK(t)
	waitAnswered(t, g.sc, g.firstOK, v.ReadyPods)
	t.Cleanup(func() { g.keepOnFailure() })
	return g
}

// roguePod: the rogue tenant's pod, through the gateway and at Eureka
// directly.
func (g *gatewayStory) roguePod(t *testing.T) {
	ctx := context.Background()
	before := g.sc.StatsT(t)
	// Forbidden before the pod exists: its registrar writes at once.
	g.sentinel.forbid("the rogue pod of "+gwRogueNS, func(in harness.SpringInstance) bool {
		return in.Metadata[eureka.MetaNamespace] == gwRogueNS || strings.Contains(in.InstanceID, "."+gwRogueNS+".")
	})
	record(t).Watch(gwRogueNS)
	pod, err := c.StartRoguePod(ctx, cluster.RogueOptions{
		Namespace: gwRogueNS, Name: gwRoguePod, NamespaceLabels: map[string]string{cluster.NoSharedAppsLabel: "true"},
		App: strings.ToUpper(gwApp), GatewayURL: cluster.GatewayURL, EurekaURL: g.peers.URLs()[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	ip := pod.Status.PodIP
	g.sentinel.forbid("the rogue pod's address "+ip, func(in harness.SpringInstance) bool { return in.IPAddr == ip || in.HostName == ip })
	began := time.Now()
	ev, err := c.WaitRefusal(ctx, pod, "register", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the gateway refused the rogue pod's registration %s after its registrars started: %s %s", time.Since(began).Round(100*time.Millisecond), ev.Reason, ev.Note)
	if !strings.Contains(ev.Note, "(AppNotGranted)") || !strings.Contains(ev.Note, gwRogueNS) || ev.Type != corev1.EventTypeWarning {
		t.Errorf("the refusal names %q, want a Warning naming the ownership rule (AppNotGranted) and namespace %s", ev.Note, gwRogueNS)
	}
	line, err := c.WaitEurekaRefused(ctx, pod, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the same pod at Eureka directly, with the same token: %s", line)
	// Neither registrar ever got through: the one via the gateway kept
	// being refused, the other kept getting 401. One more read of both
	// peers after both refusals, so the sentinel has looked.
	g.sentinel.waitReads(t, 2)
	id := cluster.RogueInstanceID(pod, gwApp)
	for i, peer := range g.peers.Servers {
		if listed, err := cluster.Listed(ctx, peer, strings.ToUpper(gwApp), id); err != nil || listed {
			t.Errorf("peer %d's live registry: instance %s listed %t (%v)", i+1, id, listed, err)
		}
	}
	d := g.sc.StatsT(t).Since(before)
	t.Logf("the Spring client meanwhile: %d calls, %d failed", d.OK+d.Failed, d.Failed)
}

// vms: a VM writes WALLET with WALLET's credentials, never with
// another app's.
func (g *gatewayStory) vms(t *testing.T) {
	ctx := context.Background()
	parent := g.t
	pw, other := password(t), password(t)
	for _, s := range []struct{ name, user, password, app string }{
		{gwVMSecret, "wallet-vm", pw, strings.ToUpper(gwApp)}, {gwOtherSecret, "invoices-vm", other, gwOtherApp},
	} {
		if err := c.ClientSecret(ctx, s.name, s.user, s.password); err != nil {
			t.Fatal(err)
		}
		policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gw-" + s.name},
			Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{s.app}, ClientSecrets: []string{s.name}}}
		if err := c.Node.Client.Create(ctx, policy); err != nil {
			t.Fatal(err)
		}
		parent.Cleanup(func() {
			_ = c.Node.Client.Delete(context.Background(), policy)
			_ = c.Node.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.ManagerNamespace, Name: s.name}})
		})
	}
	before := g.sc.StatsT(t)
	began := time.Now()
	vm1, err := harness.StartSpringVM(ctx, harness.SpringVMOptions{
		EurekaURL: cluster.WithCredentials(g.hostURL, "wallet-vm", pw), App: gwApp, Name: "vm-1", Host: node.NodeIP, LogDir: g.dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.vm1 = vm1
	parent.Cleanup(func() { _ = vm1.Stop() })
	harness.Eventually(t, 3*time.Minute, "vm-1 listed UP by Eureka beside the pods", func() error {
		v, err := c.LookThrough(ctx, g.app, g.read)
		if err != nil {
			return err
		}
		if len(v.Elsewhere) != 1 || !strings.HasSuffix(v.Elsewhere[0], " UP") {
			return fmt.Errorf("instances not the pods': %v", v.Elsewhere)
		}
		return nil
	})
	waitAnswered(t, g.sc, before, []string{"vm-1"})
	t.Logf("vm-1, with WALLET's credentials in its Eureka URL, registered and was called %s after it started", time.Since(began).Round(time.Second))

	vm2, err := harness.StartSpringVM(ctx, harness.SpringVMOptions{
		EurekaURL: cluster.WithCredentials(g.hostURL, "invoices-vm", other), App: gwApp, Name: "vm-2", Host: node.NodeIP, LogDir: g.dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = vm2.Stop() }()
	port := strings.TrimSuffix(vm2.StatsURL()[strings.LastIndex(vm2.StatsURL(), ":")+1:], "/stats")
	g.sentinel.forbid("vm-2 (port "+port+")", func(in harness.SpringInstance) bool {
		return in.IPAddr == node.NodeIP && fmt.Sprint(in.Port["$"]) == port
	})
	line := waitGatewayLog(t, "the gateway refusing vm-2, a client of Secret "+gwOtherSecret+", for WALLET",
		`"reason":"AppNotBoundToClient"`, `"who":"client of Secret `+gwOtherSecret+`"`, `"app":"WALLET"`, `"verdict":"refused"`)
	t.Logf("vm-2, with INVOICES's credentials: %s", line)
	g.sentinel.waitReads(t, 3)
	d := g.sc.StatsT(t).Since(before)
	t.Logf("the Spring client meanwhile: %d calls, %d failed; answered by %v", d.OK+d.Failed, d.Failed, d.ByInstance)
}

// rolloutAndCutOver: a rollout through the gateway, then Standby (the
// manager's override, the VM alone serving) and Serve again.
func (g *gatewayStory) rolloutAndCutOver(t *testing.T) {
	if g.vm1 == nil {
		t.Fatal("no vm-1 to stand by for the pods")
	}
	start := g.sc.StatsT(t)
	d, began := rolloutCalledAt(t, g.app, g.sc, g.read)
	t.Logf("rollout through the gateway in %s: %d calls by name, %d failed", time.Since(began).Round(time.Second), d.OK+d.Failed, d.Failed)

	setTraffic(t, g.app, v1alpha1.TrafficStandby)
	waitView(t, g.app, "Standby: the pods held OUT_OF_SERVICE by the manager through the gateway, vm-1 serving", func(st v1alpha1.EurekaSyncerStatus) error {
		if st.OutOfServiceInstances != 2 || st.UpInstances != 0 || st.TrafficTo != v1alpha1.TrafficToElsewhere {
			return fmt.Errorf("UP %d, OUT_OF_SERVICE %d, calls to %q", st.UpInstances, st.OutOfServiceInstances, st.TrafficTo)
		}
		return trafficApplied(st, "StandingBy")
	})
	standby := callsWithoutPods(t, g.sc, g.app, 2*time.Minute, false)
	t.Logf("Standby: a run of %d calls, all to vm-1", standby.OK)

	switched := time.Now()
	setTraffic(t, g.app, v1alpha1.TrafficServe)
	waitView(t, g.app, "Serve: the pods UP beside vm-1", func(st v1alpha1.EurekaSyncerStatus) error {
		if st.UpInstances != 2 || st.TrafficTo != v1alpha1.TrafficToBoth {
			return fmt.Errorf("UP %d, calls to %q", st.UpInstances, st.TrafficTo)
		}
		return trafficApplied(st, "Serving")
	})
	before := g.sc.StatsT(t)
	waitAnswered(t, g.sc, before, append(readyPods(t, g.app), "vm-1"))
	t.Logf("Serve: every pod answered again within %s of the switch", time.Since(switched).Round(time.Second))
	total := g.sc.StatsT(t).Since(start)
	t.Logf("rollout and Standby → Serve: %d calls by name, %d failed; answered by %v", total.OK+total.Failed, total.Failed, total.ByInstance)
	if total.Failed != 0 {
		t.Errorf("%d of %d calls failed; last: %s", total.Failed, total.OK+total.Failed, total.LastError)
	}
}

// replicaKilled: a rollout during which a gateway replica is deleted with
// grace 0, so it stops at once, requests under way included.
func (g *gatewayStory) replicaKilled(t *testing.T) {
	ctx := context.Background()
	before := g.sc.StatsT(t)
	began := time.Now()
	stamp := rollout(t, g.app)
	waitFirstRolledTo(t, g.app, stamp)
	// Killed as the first new pod turns ready: an old pod begins to
	// terminate, its registrar cancels, the new one turns UP, all through
	// the gateway.
	harness.Eventually(t, 2*time.Minute, "the first pod of the new template ready", func() error {
		for _, p := range podsOf(t, g.app) {
			if newTemplate(&p, stamp) && cluster.PodReady(&p) {
				return nil
			}
		}
		return fmt.Errorf("none ready yet")
	})
	pods, err := c.GatewayPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil && cluster.PodReady(&p) })
	if i < 0 {
		t.Fatalf("no ready gateway replica among %d pods", len(pods))
	}
	victim := pods[i]
	if err := c.Node.Client.Delete(ctx, &victim, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway replica %s deleted with grace 0, %s into the rollout", victim.Name, time.Since(began).Round(100*time.Millisecond))
	ready := waitRolledOutTo(t, g.app, g.read, stamp, 3*time.Minute)
	waitAnswered(t, g.sc, before, ready)
	if err := c.WaitGatewayRolledOut(ctx); err != nil {
		t.Fatal(err)
	}
	d := g.sc.StatsT(t).Since(before)
	t.Logf("rollout with a gateway replica killed: %s, %d calls by name, %d failed; both replicas ready again", time.Since(began).Round(time.Second), d.OK+d.Failed, d.Failed)
	if d.Failed != 0 {
		t.Errorf("%d of %d calls failed; last: %s", d.Failed, d.OK+d.Failed, d.LastError)
	}
}

// startGatewayClient starts the Spring client reading the registry through
// the gateway, calling WALLET by name; its log stays in dir.
func startGatewayClient(t *testing.T, gatewayURL, dir string) *harness.SpringClient {
	t.Helper()
	sc, err := harness.StartSpringClient(context.Background(), harness.SpringClientOptions{
		EurekaURL: gatewayURL, Service: gwApp, CacheSeconds: clientCacheSeconds, LogDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop() })
	return sc
}

// waitGatewayLog waits until a line of a gateway replica's log contains
// each of words, and returns it.
func waitGatewayLog(t *testing.T, what string, words ...string) string {
	t.Helper()
	var found string
	harness.Eventually(t, 3*time.Minute, what, func() error {
		pods, err := c.GatewayPods(context.Background())
		if err != nil {
			return err
		}
		for i := range pods {
			log, err := c.ContainerLog(context.Background(), &pods[i], cluster.GatewayContainer)
			if err != nil {
				continue
			}
		lines:
			for line := range strings.SplitSeq(log, "\n") {
				for _, w := range words {
					if !strings.Contains(line, w) {
						continue lines
					}
				}
				found = line
				return nil
			}
		}
		return fmt.Errorf("no line of the %d replicas' logs names %q", len(pods), words)
	})
	return found
}

// keepOnFailure keeps, when the story has failed, what a user would look
// at in its artifacts (record), beside what the Recorder keeps of its
// namespaces and of the manager's and the gateway's pods: the syncers, and
// g.dir (the Spring client's and the VMs' logs, Eureka's and every failed
// call, failed-calls.txt) as gateway-story/.
func (g *gatewayStory) keepOnFailure() {
	if !g.t.Failed() {
		return
	}
	a := record(g.t).Artifacts()
	for _, ns := range []string{gwNamespace, gwRogueNS} {
		var syncers v1alpha1.EurekaSyncerList
		if err := c.Node.Client.List(context.Background(), &syncers, client.InNamespace(ns)); err == nil {
			if out, err := yaml.Marshal(&syncers); err == nil {
				a.Write(filepath.Join(ns, "syncers.yaml"), out)
			}
		}
	}
	a.CopyDir("gateway-story", g.dir)
}

// callLog polls a Spring client's counters and writes down every failed
// call as it is counted: when, how many since the last poll, and the last
// error (the client keeps only the last).
type callLog struct {
	path    string
	mu      sync.Mutex
	last    harness.SpringStats
	ok      chan harness.SpringStats // the first reading with a success
	stopped chan struct{}
	once    sync.Once
	done    chan struct{}
}

func logCalls(t *testing.T, sc *harness.SpringClient, path string) *callLog {
	l := &callLog{path: path, ok: make(chan harness.SpringStats, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(l.done)
		defer f.Close()
		sentOK := false
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			s, err := sc.Stats(context.Background())
			if err != nil {
				continue
			}
			l.mu.Lock()
			if s.Failed > l.last.Failed {
				fmt.Fprintf(f, "%s %d failed (%d ok so far): %s\n", time.Now().Format(time.RFC3339Nano), s.Failed-l.last.Failed, s.OK, s.LastError)
				if sentOK {
					t.Logf("%d call(s) failed: %s", s.Failed-l.last.Failed, s.LastError)
				}
			}
			l.last = s
			l.mu.Unlock()
			if !sentOK && s.OK > 0 {
				l.ok <- s
				sentOK = true
			}
		}
	}()
	t.Cleanup(l.stop)
	return l
}

// stop ends the polling.
func (l *callLog) stop() {
	l.once.Do(func() { close(l.stopped) })
	<-l.done
}

// waitFirstOK waits until the client's first call succeeded and returns
// its counters then.
func (l *callLog) waitFirstOK(t *testing.T) harness.SpringStats {
	t.Helper()
	select {
	case s := <-l.ok:
		return s
	case <-time.After(3 * time.Minute):
		t.Fatalf("the Spring client made no successful call within 3 min (its failures: %s)", l.path)
	}
	return harness.SpringStats{}
}

// sentinel reads an app on every peer once a second and notes each
// instance it must never find.
type sentinel struct {
	mu      sync.Mutex
	rules   []forbidden
	seen    []string
	n       int
	stopped chan struct{}
	done    chan struct{}
	once    sync.Once
}

type forbidden struct {
	what string
	is   func(harness.SpringInstance) bool
}

func watchNeverListed(peers *harness.EurekaPeers, app string) *sentinel {
	s := &sentinel{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			for i, p := range peers.Servers {
				instances, err := cluster.ReadApp(context.Background(), p, app)
				if err != nil {
					continue
				}
				s.mu.Lock()
				for _, in := range instances {
					for _, r := range s.rules {
						if r.is(in) {
							raw, _ := json.Marshal(in)
							s.seen = append(s.seen, fmt.Sprintf("%s: peer %d lists %s (%s)", time.Now().Format(time.RFC3339Nano), i+1, r.what, raw))
						}
					}
				}
				s.mu.Unlock()
			}
			s.mu.Lock()
			s.n++
			s.mu.Unlock()
			select {
			case <-s.stopped:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return s
}

func (s *sentinel) forbid(what string, is func(harness.SpringInstance) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, forbidden{what, is})
}

func (s *sentinel) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// waitReads waits until the sentinel has read every peer n more times.
func (s *sentinel) waitReads(t *testing.T, n int) {
	t.Helper()
	from := s.reads()
	harness.Eventually(t, time.Minute, fmt.Sprintf("%d more reads of every peer", n), func() error {
		if got := s.reads() - from; got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}

// stop ends the reads and returns what it found.
func (s *sentinel) stop() []string {
	s.once.Do(func() { close(s.stopped) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// password is a random password without ':' (Spring drops credentials
// whose password has one).
func password(t *testing.T) string {
	t.Helper()
	return "pw" + strings.ToLower(rand.Text())
}
