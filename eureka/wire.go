package eureka

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hudl/fargo"
	"github.com/op/go-logging"
	"golang.org/x/sync/errgroup"
)

func init() {
	// fargo logs at DEBUG by default, request bodies included. The layer
	// reports what matters itself, so fargo's own modules only speak on
	// errors.
	for _, module := range []string{"fargo", "fargo.metadata", "fargo.marshal"} {
		logging.SetLevel(logging.ERROR, module)
	}
}

// toFargo builds a fresh fargo instance from inst for one write, so that no
// state read back from a server (fargo keeps metadata only in raw form after
// a read) can drop or alter what is sent.
func toFargo(inst Instance) *fargo.Instance {
	fi := &fargo.Instance{
		InstanceId:        inst.InstanceID,
		HostName:          inst.HostName,
		App:               strings.ToUpper(inst.App),
		IPAddr:            inst.IPAddr,
		VipAddress:        inst.VIPAddress,
		SecureVipAddress:  inst.SecureVIPAddress,
		Status:            fargo.StatusType(inst.Status),
		Port:              inst.Port,
		PortEnabled:       inst.PortEnabled,
		SecurePort:        inst.SecurePort,
		SecurePortEnabled: inst.SecurePortEnabled,
		HomePageUrl:       inst.HomePageURL,
		StatusPageUrl:     inst.StatusPageURL,
		HealthCheckUrl:    inst.HealthCheckURL,
		DataCenterInfo:    fargo.DataCenterInfo{Name: fargo.MyOwn},
		LeaseInfo: fargo.LeaseInfo{
			RenewalIntervalInSecs: int32(inst.RenewalInterval / time.Second),
			DurationInSecs:        int32(inst.Duration / time.Second),
		},
	}
	if fi.Status == "" {
		fi.Status = fargo.STARTING
	}
	for k, v := range inst.Metadata {
		fi.SetMetadataString(k, v)
	}
	return fi
}

// fromFargo converts what a server returned into the layer's Instance. The
// server writes the override as "overriddenStatus"; fargo's field, tagged
// with the legacy "overriddenstatus", gets it through encoding/json's
// case-insensitive match of keys.
func fromFargo(fi *fargo.Instance) (Instance, error) {
	inst := Instance{
		App:               fi.App,
		InstanceID:        fi.InstanceId,
		HostName:          fi.HostName,
		IPAddr:            fi.IPAddr,
		VIPAddress:        fi.VipAddress,
		SecureVIPAddress:  fi.SecureVipAddress,
		Status:            Status(fi.Status),
		OverriddenStatus:  Status(fi.Overriddenstatus),
		Port:              fi.Port,
		PortEnabled:       fi.PortEnabled,
		SecurePort:        fi.SecurePort,
		SecurePortEnabled: fi.SecurePortEnabled,
		HomePageURL:       fi.HomePageUrl,
		StatusPageURL:     fi.StatusPageUrl,
		HealthCheckURL:    fi.HealthCheckUrl,
		RenewalInterval:   time.Duration(fi.LeaseInfo.RenewalIntervalInSecs) * time.Second,
		Duration:          time.Duration(fi.LeaseInfo.DurationInSecs) * time.Second,
	}
	if ts := fi.LeaseInfo.LastRenewalTimestamp; ts > 0 {
		inst.LastUpdated = time.UnixMilli(ts)
	}
	meta, err := metadataOf(fi)
	if err != nil {
		return Instance{}, fmt.Errorf("instance %s metadata: %w", fi.InstanceId, err)
	}
	inst.Metadata = meta
	return inst, nil
}

// metadataOf reads an instance's metadata through fargo's parser. Keys
// starting with "@" are the Java server's type hints (an empty map comes
// back as {"@class": "java.util.Collections$EmptyMap"}), not metadata.
func metadataOf(fi *fargo.Instance) (map[string]string, error) {
	app := fargo.Application{Instances: []*fargo.Instance{fi}}
	if err := app.ParseAllMetadata(); err != nil {
		return nil, err
	}
	meta := map[string]string{}
	for k, v := range fi.Metadata.GetMap() {
		if strings.HasPrefix(k, "@") {
			continue
		}
		switch v := v.(type) {
		case string:
			meta[k] = v
		default:
			meta[k] = fmt.Sprint(v)
		}
	}
	return meta, nil
}

// encodeRegistration is the POST body for inst. fargo's instance has no
// lastDirtyTimestamp, so it is added beside fargo's fields, as a string of
// Unix milliseconds like the Java client writes it. The override is sent
// under "overriddenStatus", the key the server itself writes, in place of
// fargo's legacy "overriddenstatus" (which fargo always sends, empty when
// unset); it is left out when there is none, which the server reads as
// UNKNOWN.
func encodeRegistration(inst Instance) ([]byte, error) {
	body, err := json.Marshal(toFargo(inst))
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	delete(fields, "overriddenstatus")
	if o := inst.OverriddenStatus; o != "" && o != StatusUnknown {
		fields["overriddenStatus"] = json.RawMessage(strconv.Quote(string(o)))
	}
	if !inst.LastDirtyTimestamp.IsZero() {
		fields["lastDirtyTimestamp"] = json.RawMessage(strconv.Quote(strconv.FormatInt(inst.LastDirtyTimestamp.UnixMilli(), 10)))
	}
	if body, err = json.Marshal(fields); err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Instance json.RawMessage `json:"instance"`
	}{body})
}

// decodeApp decodes GET /apps/{APP}, an answer of the server's response
// cache asked for at asked.
func decodeApp(body []byte, asked time.Time) ([]Instance, error) {
	var resp fargo.GetAppResponseJson
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode application: %w", err)
	}
	insts, latest, err := fromFargoAll(resp.Application.Instances)
	if err != nil {
		return nil, err
	}
	observed(insts, leaseObservedAt(latest, asked, true))
	return insts, nil
}

// decodeInstance decodes GET /apps/{APP}/{id}, read straight from the
// registry after asked.
func decodeInstance(body []byte, asked time.Time) (Instance, error) {
	var resp struct {
		Instance fargo.Instance `json:"instance"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return Instance{}, fmt.Errorf("decode instance: %w", err)
	}
	inst, err := fromFargo(&resp.Instance)
	if err != nil {
		return Instance{}, err
	}
	inst.LeaseObservedAt = leaseObservedAt(encodedNoEarlierThan(&resp.Instance), asked, false)
	return inst, nil
}

// fromFargoAll converts the instances of one answer, and returns the
// latest moment their leases show the server was at
// (encodedNoEarlierThan).
func fromFargoAll(fis []*fargo.Instance) ([]Instance, time.Time, error) {
	out := make([]Instance, 0, len(fis))
	var latest time.Time
	for _, fi := range fis {
		inst, err := fromFargo(fi)
		if err != nil {
			return nil, time.Time{}, err
		}
		out = append(out, inst)
		latest = later(latest, encodedNoEarlierThan(fi))
	}
	return out, latest, nil
}

// observed stamps insts, all of one answer, with when it showed their
// leases.
func observed(insts []Instance, at time.Time) {
	for i := range insts {
		insts[i].LeaseObservedAt = at
	}
}

// decodeRegistry decodes GET /apps, asked for at asked, a batch of
// applications at a time as it arrives (eachApplication), so that a
// registry of tens of thousands of instances is held once, as decoded
// instances, and not also as its whole JSON, fargo's whole-response types
// and their debug copies of that JSON.
func decodeRegistry(body io.Reader, asked time.Time) (*Registry, error) {
	r := &Registry{apps: map[string][]Instance{}, versions: map[string]uint64{}}
	var latest time.Time
	hashcode, err := decodeApplications(body, func(dec *json.Decoder) error {
		return eachApplication(dec, func(app appInstances) error {
			r.add(app.insts)
			latest = later(latest, app.latest)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("decode applications: %w", err)
	}
	r.hashcode = hashcode
	// One answer: every lease in it is shown as of the same moment, which
	// the freshest of them bounds.
	at := leaseObservedAt(latest, asked, true)
	for _, insts := range r.apps {
		observed(insts, at)
	}
	return r, nil
}

// decodeApplications walks the {"applications": {...}} answer of GET /apps
// and /apps/delta, handing the "application" value to application, and
// returns apps__hashcode.
func decodeApplications(body io.Reader, application func(dec *json.Decoder) error) (string, error) {
	dec := json.NewDecoder(body)
	hashcode := ""
	found := false
	err := eachField(dec, func(key string) error {
		if key != "applications" {
			return skipValue(dec)
		}
		found = true
		return eachField(dec, func(key string) error {
			switch key {
			case "apps__hashcode":
				return dec.Decode(&hashcode)
			case "application":
				return application(dec)
			default:
				return skipValue(dec)
			}
		})
	})
	if err == nil && !found {
		err = errors.New(`no "applications" object`)
	}
	return hashcode, err
}

// eachField calls field for each key of the object dec is at; field must
// consume the key's value.
func eachField(dec *json.Decoder, field func(key string) error) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key %v", tok)
		}
		if err := field(key); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// appInstances are the instances of one application of an answer, and
// the latest moment their leases show the server was at.
type appInstances struct {
	insts  []Instance
	latest time.Time
}

// decodeApplication decodes one application's JSON through fargo and
// converts its instances.
func decodeApplication(raw []byte) (appInstances, error) {
	var app fargo.Application
	if err := json.Unmarshal(raw, &app); err != nil {
		return appInstances{}, err
	}
	insts, latest, err := fromFargoAll(app.Instances)
	if err != nil {
		return appInstances{}, fmt.Errorf("application %s: %w", app.Name, err)
	}
	return appInstances{insts: insts, latest: latest}, nil
}

// decodeBatchBytes is about how much of an answer's JSON eachApplication
// holds undecoded at once: a few MiB of a registry's twenty.
var decodeBatchBytes = 4 << 20

// eachApplication decodes the "application" value, an array of
// applications (or, from old servers, a single one), and calls each with
// them in the answer's order, on the caller's goroutine. The array is read
// a batch of about decodeBatchBytes of JSON at a time, whose applications
// are decoded by as many goroutines as Go runs at once: fargo's decoding
// (a custom unmarshaler inside another, each scanning its bytes again) is
// most of what reading a large registry costs, and a manager that starts
// over a thousand syncers waits for that read before its first pass.
func eachApplication(dec *json.Decoder, each func(appInstances) error) error {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return err
	case tok == nil: // null: no application
		return nil
	case tok != json.Delim('[') && tok != json.Delim('{'):
		return fmt.Errorf("application: got %v", tok)
	case tok == json.Delim('{'):
		// A single application: its fields follow the '{' just read.
		fields := map[string]json.RawMessage{}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			fields[fmt.Sprint(key)] = v
		}
		if err := expectDelim(dec, '}'); err != nil {
			return err
		}
		raw, err := json.Marshal(fields)
		if err != nil {
			return err
		}
		app, err := decodeApplication(raw)
		if err != nil {
			return err
		}
		return each(app)
	}
	for dec.More() {
		var batch []json.RawMessage
		for size := 0; size < decodeBatchBytes && dec.More(); {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			batch = append(batch, raw)
			size += len(raw)
		}
		apps := make([]appInstances, len(batch))
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i := range batch {
			g.Go(func() (err error) {
				apps[i], err = decodeApplication(batch[i])
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for _, app := range apps {
			if err := each(app); err != nil {
				return err
			}
		}
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("got %v, want %v", tok, want)
	}
	return nil
}

func skipValue(dec *json.Decoder) error {
	var skip json.RawMessage
	return dec.Decode(&skip)
}

// appChanges are the changed instances of one app in a delta, and what
// happened to them.
type appChanges struct {
	app     string
	changes []change
}

// decodeDelta decodes GET /apps/delta, asked for at asked: each app's
// changed instances and what happened to them (actionType, which fargo's
// Instance does not keep), each stamped with when the answer showed its
// lease, and the apps__hashcode.
func decodeDelta(body io.Reader, asked time.Time) ([]appChanges, string, error) {
	var all []appChanges
	var latest time.Time
	hashcode, err := decodeApplications(body, func(dec *json.Decoder) error {
		if err := expectDelim(dec, '['); err != nil {
			return err
		}
		for dec.More() {
			var app struct {
				Name      string            `json:"name"`
				Instances []json.RawMessage `json:"instance"`
			}
			if err := dec.Decode(&app); err != nil {
				return err
			}
			changes, appLatest, err := decodeChanges(app.Instances)
			if err != nil {
				return fmt.Errorf("application %s: %w", app.Name, err)
			}
			all = append(all, appChanges{app: app.Name, changes: changes})
			latest = later(latest, appLatest)
		}
		return expectDelim(dec, ']')
	})
	if err != nil {
		return nil, "", fmt.Errorf("decode delta: %w", err)
	}
	// The server encodes a delta's instances from their leases as they
	// stand when it encodes the answer, not as they stood at the change.
	at := leaseObservedAt(latest, asked, true)
	for _, a := range all {
		for i := range a.changes {
			a.changes[i].instance.LeaseObservedAt = at
		}
	}
	return all, hashcode, nil
}

// decodeChanges decodes a delta's instances of one app, and returns the
// latest moment their leases show the server was at.
func decodeChanges(raws []json.RawMessage) ([]change, time.Time, error) {
	changes := make([]change, 0, len(raws))
	var latest time.Time
	for _, raw := range raws {
		var fi fargo.Instance
		var action struct {
			ActionType string `json:"actionType"`
		}
		if err := json.Unmarshal(raw, &fi); err != nil {
			return nil, time.Time{}, err
		}
		if err := json.Unmarshal(raw, &action); err != nil {
			return nil, time.Time{}, err
		}
		switch action.ActionType {
		case actionAdded, actionModified, actionDeleted:
		default:
			return nil, time.Time{}, fmt.Errorf("instance %s: unknown actionType %q", fi.InstanceId, action.ActionType)
		}
		inst, err := fromFargo(&fi)
		if err != nil {
			return nil, time.Time{}, err
		}
		changes = append(changes, change{action: action.ActionType, instance: inst})
		latest = later(latest, encodedNoEarlierThan(&fi))
	}
	return changes, latest, nil
}
