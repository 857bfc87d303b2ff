package webhook

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Result is everything Inject decided and made for one pod.
type Result struct {
	// Decision says whether and why; Reason is ReasonInvalidConfig when the
	// syncer and the pod do not fit together.
	Decision
	// Pod is the pod to admit: the input pod itself when nothing changes,
	// else a changed copy (injected, or annotated as skipped).
	Pod *corev1.Pod
	// Patch turns the input pod into Pod: whole-field operations on the
	// fields that changed (see patchOps). Empty when nothing changes.
	Patch []jsonpatch.Operation
	// Adaptations are what was adapted or could not be done (injected
	// pods); their messages are among Warnings.
	Adaptations []v1alpha1.Adaptation
	// Denied is the message of a denial, naming what to fix; empty when
	// the pod is admitted.
	Denied string
}

// Inject is the webhook's whole decision and mutation for one pod, without
// I/O: Decide, then Mutate or Skip, then the JSON patch from pod to the
// result. pod is not modified.
func Inject(pod *corev1.Pod, ns Namespace, syncers []v1alpha1.EurekaSyncer, defaults Defaults) Result {
	r := Result{Decision: Decide(pod, ns, syncers), Pod: pod}
	switch {
	case r.Reason == ReasonInvalidAnnotation:
		r.Denied = r.Err.Error()
		return r
	case r.Skipped != nil:
		r.Pod = Skip(pod, r.Syncer.Name, *r.Skipped)
	case r.Reason == ReasonAlreadyInjected:
		r.Pod, r.Adaptations = Converge(pod, r.Syncer, defaults)
		for _, a := range r.Adaptations {
			r.Warnings = append(r.Warnings, a.Message)
		}
	case r.Inject:
		if err := defaults.CheckAllowed(r.Syncer); err != nil {
			return refuseNotAllowed(r, err)
		}
		mutated, adaptations, err := Mutate(pod, Config{Syncer: r.Syncer, Overrides: r.Overrides, Defaults: defaults})
		if err != nil {
			r.Inject, r.Reason, r.Err = false, ReasonInvalidConfig, err
			r.Denied = fmt.Sprintf("EurekaSyncer %s cannot register this pod: %v", r.Syncer.Name, err)
			return r
		}
		r.Pod, r.Adaptations = mutated, adaptations
		for _, a := range adaptations {
			r.Warnings = append(r.Warnings, a.Message)
		}
	default:
		return r
	}
	r.Patch = patchOps(pod, r.Pod)
	return r
}

// Converge brings a pod Eurekube already injected up to date when it comes
// back: reinvoked after a later webhook changed it, or written by
// `eurekube inject` and applied. Containers added since get the drain
// (drainLaterContainers), and the traffic annotation follows the syncer
// that injected the pod, so a pod injected offline while its syncer was
// switched registers as the syncer says now (syncer nil: gone, left as
// it is). It injects nothing twice and lengthens no grace period: a pod
// sent back unchanged comes back unchanged, Inject(Inject(p)) = Inject(p).
func Converge(pod *corev1.Pod, syncer *v1alpha1.EurekaSyncer, defaults Defaults) (*corev1.Pod, []v1alpha1.Adaptation) {
	out := pod.DeepCopy()
	changed := false
	if syncer != nil {
		if traffic := string(syncer.EffectiveTraffic()); out.Annotations[v1alpha1.TrafficAnnotation] != traffic {
			out.Annotations[v1alpha1.TrafficAnnotation] = traffic
			changed = true
		}
	}
	plan := drainPlan{execOnly: defaults.ExecSleepFallback, image: cmp.Or(v1alpha1.InjectedRegistrarImage(out), defaults.RegistrarImage)}
	if n, err := strconv.ParseInt(out.Annotations[v1alpha1.DrainAnnotation], 10, 32); err == nil {
		plan.seconds = int32(n)
	}
	if c := v1alpha1.RegistrarContainer(out); c != nil {
		plan.resources = *c.Resources.DeepCopy()
	}
	adaptations := drainLaterContainers(out, plan)
	if len(adaptations) > 0 {
		recorded, _ := v1alpha1.DecodeAdaptations(out.Annotations[v1alpha1.AdaptationsAnnotation])
		out.Annotations[v1alpha1.AdaptationsAnnotation] = v1alpha1.EncodeAdaptations(append(recorded, adaptations...))
		changed = true
	}
	if !changed {
		return pod, nil
	}
	return out, adaptations
}

// patchOps is the JSON patch from before to after, built from the fields
// Mutate, Skip and Converge may change rather than by diffing the whole
// pod, and as fine-grained as they change: an annotation per key, a
// container appended with "-", and of a container that changed only its
// changed fields. So everything else in the request's object is left
// alone, fields unknown to this build (a newer API server's) included,
// where setting whole arrays would drop them.
// TestInject_PatchTurnsTheRequestIntoThePod checks it against every golden
// pod; TestInject_PatchKeepsFieldsThisBuildDoesNotKnow, the rest.
func patchOps(before, after *corev1.Pod) []jsonpatch.Operation {
	ops := make([]jsonpatch.Operation, 0, 12)
	if !maps.Equal(before.Annotations, after.Annotations) {
		if before.Annotations == nil {
			ops = append(ops, add("/metadata/annotations", after.Annotations))
		} else {
			keys := slices.Sorted(maps.Keys(after.Annotations))
			for _, k := range keys {
				if v, had := before.Annotations[k]; !had || v != after.Annotations[k] {
					ops = append(ops, add("/metadata/annotations/"+escapePointer(k), after.Annotations[k]))
				}
			}
		}
	}
	ops = listOps(ops, "/spec/initContainers", before.Spec.InitContainers, after.Spec.InitContainers)
	ops = listOps(ops, "/spec/containers", before.Spec.Containers, after.Spec.Containers)
	ops = listOps(ops, "/spec/volumes", before.Spec.Volumes, after.Spec.Volumes)
	if g := after.Spec.TerminationGracePeriodSeconds; g != nil && (before.Spec.TerminationGracePeriodSeconds == nil || *g != *before.Spec.TerminationGracePeriodSeconds) {
		ops = append(ops, add("/spec/terminationGracePeriodSeconds", *g))
	}
	return ops
}

// add is an "add" operation, which replaces a member that exists (RFC
// 6902, 4.1).
func add(path string, value any) jsonpatch.Operation {
	return jsonpatch.Operation{Operation: "add", Path: path, Value: value}
}

// listOps patches the list at path from before to after, which Eurekube
// only ever changes in place or appends to: a changed element through
// fieldOps, each appended one with "-", and the whole list where the
// request has none.
func listOps[T any](ops []jsonpatch.Operation, path string, before, after []T) []jsonpatch.Operation {
	switch {
	case len(after) == 0 && len(before) == 0:
		return ops
	case len(before) == 0 || len(after) < len(before):
		return append(ops, add(path, after))
	}
	for i := range before {
		// Through pointers, so that no element is copied to be compared.
		ops = fieldOps(ops, path, i, reflect.ValueOf(&before[i]).Elem(), reflect.ValueOf(&after[i]).Elem())
	}
	for _, v := range after[len(before):] {
		ops = append(ops, add(path+"/-", v))
	}
	return ops
}

// fieldOps patches the struct at list[index] from before to after, one
// operation per changed top-level field, named by its JSON tag: an emptied
// omitempty field is removed, any other is set. Fields compare as
// equality.Semantic compares them (nil and empty alike).
func fieldOps(ops []jsonpatch.Operation, list string, index int, before, after reflect.Value) []jsonpatch.Operation {
	prefix := ""
	for _, f := range jsonFieldsOf(after.Type()) {
		b, a := before.Field(f.index), after.Field(f.index)
		if semanticEqual(b, a) {
			continue
		}
		if prefix == "" {
			prefix = list + "/" + strconv.Itoa(index) + "/"
		}
		if f.omitEmpty && a.IsZero() {
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: prefix + f.token})
			continue
		}
		ops = append(ops, add(prefix+f.token, a.Interface()))
	}
	return ops
}

// semanticEqual is equality.Semantic.DeepEqual(b.Interface(),
// a.Interface()), walked in place: nothing is boxed or copied to be
// compared, resource.Quantity compares by Cmp without a reflected call,
// and no visited set is kept, as the objects a pod decodes into hold no
// cycles. Otherwise the same rules: the types with an equality of their
// own use it, nil and empty slices and maps are alike, the rest compares
// as reflect.DeepEqual does.
func semanticEqual(b, a reflect.Value) bool {
	if !b.IsValid() || !a.IsValid() {
		return b.IsValid() == a.IsValid()
	}
	t := b.Type()
	if t != a.Type() {
		return false
	}
	if t == quantityType && b.CanAddr() && a.CanAddr() {
		return b.Addr().Interface().(*resource.Quantity).Cmp(*a.Addr().Interface().(*resource.Quantity)) == 0
	}
	if eq, own := equality.Semantic.Equalities[t]; own {
		return eq.Call([]reflect.Value{b, a})[0].Bool()
	}
	switch b.Kind() {
	case reflect.Array:
		for i := range b.Len() {
			if !semanticEqual(b.Index(i), a.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if b.Len() != a.Len() {
			return false
		}
		if b.Len() == 0 || b.UnsafePointer() == a.UnsafePointer() {
			return true
		}
		for i := range b.Len() {
			if !semanticEqual(b.Index(i), a.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if b.Len() != a.Len() {
			return false
		}
		if b.Len() == 0 || b.UnsafePointer() == a.UnsafePointer() {
			return true
		}
		for it := b.MapRange(); it.Next(); {
			if !semanticEqual(it.Value(), a.MapIndex(it.Key())) {
				return false
			}
		}
		return true
	case reflect.Interface:
		if b.IsNil() || a.IsNil() {
			return b.IsNil() == a.IsNil()
		}
		return semanticEqual(b.Elem(), a.Elem())
	case reflect.Pointer:
		if b.IsNil() || a.IsNil() {
			return b.IsNil() == a.IsNil()
		}
		return semanticEqual(b.Elem(), a.Elem())
	case reflect.Struct:
		for i := range b.NumField() {
			if !semanticEqual(b.Field(i), a.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Func:
		return b.IsNil() && a.IsNil()
	}
	if !b.CanInterface() || !a.CanInterface() {
		// equality.Semantic refuses unexported fields too.
		panic(fmt.Sprintf("cannot compare the unexported %s fields of a patched object", t))
	}
	switch b.Kind() {
	case reflect.String:
		return b.String() == a.String()
	case reflect.Bool:
		return b.Bool() == a.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return b.Int() == a.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return b.Uint() == a.Uint()
	case reflect.Float32, reflect.Float64:
		return b.Float() == a.Float()
	}
	return b.Interface() == a.Interface()
}

// quantityType is resource.Quantity's, which equality.Semantic compares
// by value (Cmp): its fields are unexported.
var quantityType = reflect.TypeFor[resource.Quantity]()

// jsonField is a struct field that JSON encodes: its index, its JSON
// Pointer token and whether it is omitted when empty.
type jsonField struct {
	index     int
	token     string
	omitEmpty bool
}

// jsonFields caches jsonFieldsOf: every patched container and volume reads
// the same few types' tags.
var jsonFields sync.Map // reflect.Type → []jsonField

// jsonFieldsOf is the JSON-encoded fields of struct type t, in order.
func jsonFieldsOf(t reflect.Type) []jsonField {
	if fs, ok := jsonFields.Load(t); ok {
		return fs.([]jsonField)
	}
	var fs []jsonField
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fs = append(fs, jsonField{index: i, token: escapePointer(name), omitEmpty: strings.Contains(opts, "omitempty")})
	}
	jsonFields.Store(t, fs)
	return fs
}

// escapePointer escapes one JSON Pointer token (RFC 6901): annotation keys
// hold '/'.
func escapePointer(token string) string {
	return pointerEscaper.Replace(token)
}

// pointerEscaper escapes a JSON pointer token (RFC 6901): built once, as
// every field of every patch goes through it.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
