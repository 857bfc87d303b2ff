package eureka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hudl/fargo"
)

// registryJSON is a GET /apps answer of apps × perApp instances shaped as
// the registrars register them (their metadata, a lease, both ports).
func registryJSON(apps, perApp int) []byte {
	sizes := make([]int, apps)
	for i := range sizes {
		sizes[i] = perApp
	}
	return registryOf(sizes)
}

// registryOf is registryJSON with sizes[a] instances of app a.
func registryOf(sizes []int) []byte {
	apps := len(sizes)
	var b bytes.Buffer
	total := 0
	for _, n := range sizes {
		total += n
	}
	fmt.Fprintf(&b, `{"applications":{"versions__delta":"1","apps__hashcode":"UP_%d_","application":[`, total)
	for a := range apps {
		if a > 0 {
			b.WriteByte(',')
		}
		app := fmt.Sprintf("APP-%04d", a)
		fmt.Fprintf(&b, `{"name":%q,"instance":[`, app)
		perApp := sizes[a]
		for i := range perApp {
			if i > 0 {
				b.WriteByte(',')
			}
			pod := fmt.Sprintf("app-%04d-7d9f8c6b5-%05d", a, i)
			ip := fmt.Sprintf("10.%d.%d.%d", a/256, a%256, i)
			fmt.Fprintf(&b, `{"instanceId":"%[1]s:%[2]s:8080","hostName":%[3]q,"app":%[2]q,"ipAddr":%[3]q,"status":"UP","overriddenStatus":"UNKNOWN",`+
				`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
				`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
				`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":1764390000000,"lastRenewalTimestamp":1764390030000,"evictionTimestamp":0,"serviceUpTimestamp":1764390000000},`+
				`"metadata":{"eurekube.io/managed-by":"eurekube","eurekube.io/cluster":"prod-eu","eurekube.io/namespace":"ns-%[4]d","eurekube.io/pod":%[1]q,"eurekube.io/pod-uid":"0b4e6f7a-5c1d-4e2f-9a3b-%012[5]d","eurekube.io/syncer":%[6]q,"zone":"eu-west-1a","management.port":"8080"},`+
				`"homePageUrl":"http://%[3]s:8080/","statusPageUrl":"http://%[3]s:8080/actuator/info","healthCheckUrl":"http://%[3]s:8080/actuator/health",`+
				`"vipAddress":%[6]q,"secureVipAddress":%[6]q,"isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"1764390000000","lastDirtyTimestamp":"1764390000000","actionType":"ADDED"}`,
				pod, app, ip, a/20, a*perApp+i, strings.ToLower(app))
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// BenchmarkDecodeRegistry decodes the registry of the bench's restart
// scenario, 1,000 apps × 20 instances (about 20 MiB of JSON).
func BenchmarkDecodeRegistry(b *testing.B) {
	body := registryJSON(1000, 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		reg, err := decodeRegistry(bytes.NewReader(body), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if reg.Len() != 20000 {
			b.Fatalf("%d instances", reg.Len())
		}
	}
}

// TestDecodeRegistry_InBatchesAsFargoDecodesTheWholeAnswer decodes
// registries of random shapes in batches of every size, from one
// application at a time to the whole answer at once, and finds what
// fargo's own decoding of the whole answer finds, in the same order.
func TestDecodeRegistry_InBatchesAsFargoDecodesTheWholeAnswer(t *testing.T) {
	defer func(was int) { decodeBatchBytes = was }(decodeBatchBytes)
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		sizes := make([]int, r.IntN(40))
		for i := range sizes {
			sizes[i] = r.IntN(6) // an app of no instance too
		}
		body := registryOf(sizes)
		var whole fargo.GetAppsResponseJson
		if err := json.Unmarshal(body, &whole); err != nil {
			t.Fatal(err)
		}
		var want []Instance
		for _, app := range whole.Response.Applications {
			insts, _, err := fromFargoAll(app.Instances)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, insts...)
		}
		for _, batch := range []int{1, 2000, 20000, len(body)} {
			decodeBatchBytes = batch
			reg, err := decodeRegistry(bytes.NewReader(body), time.Now())
			if err != nil {
				t.Fatalf("round %d, batches of %d bytes: %v", round, batch, err)
			}
			var got []Instance
			for _, app := range reg.Apps() {
				got = append(got, reg.Instances(app)...)
			}
			for i := range got {
				got[i].LeaseObservedAt = time.Time{}
			}
			if len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, batches of %d bytes: %d instances, want fargo's %d:\n%+v\nwant\n%+v", round, batch, len(got), len(want), got, want)
			}
			if reg.hashcode != whole.Response.AppsHashcode {
				t.Errorf("round %d: apps__hashcode %q, want %q", round, reg.hashcode, whole.Response.AppsHashcode)
			}
		}
	}
}

// TestRegistryAdd_GroupsByAppWhateverTheBlocks: an app listed in two
// blocks, and a block holding another app's instance, still end up one
// list per app, in the answer's order.
func TestRegistryAdd_GroupsByAppWhateverTheBlocks(t *testing.T) {
	r := &Registry{apps: map[string][]Instance{}, versions: map[string]uint64{}}
	r.add([]Instance{{App: "orders", InstanceID: "o1"}, {App: "ORDERS", InstanceID: "o2"}})
	r.add([]Instance{{App: "ledger", InstanceID: "l1"}, {App: "orders", InstanceID: "o3"}})
	r.add([]Instance{{App: "Orders", InstanceID: "o4"}})
	ids := func(app string) (out []string) {
		for _, inst := range r.Instances(app) {
			out = append(out, inst.InstanceID)
		}
		return out
	}
	if got := ids("orders"); !reflect.DeepEqual(got, []string{"o1", "o2", "o3", "o4"}) {
		t.Errorf("orders: %v", got)
	}
	if got := ids("ledger"); !reflect.DeepEqual(got, []string{"l1"}) {
		t.Errorf("ledger: %v", got)
	}
	if r.Len() != 5 {
		t.Errorf("Len %d, want 5", r.Len())
	}
}
