package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
)

// Pattern imports. An EurekaImport whose spec.app holds a '*' is a parent:
// it keeps, in its namespace, one ordinary EurekaImport per Eureka app the
// pattern matches, named after the app lower-cased, with the parent's
// spec (the concrete app, the Eureka servers, the Service type and ports,
// includeThisCluster), labelled v1alpha1.ImportPatternLabel and controlled
// by the parent. Each of those is reconciled by the single-app path of
// imports.go: its Service, slices, tenancy check (importRefusal), read
// following and deletion are that path's, not copies. The parent only
// adds and removes them, and sums up their statuses in its own.
//
// Matching uses the EurekaAppPolicy rule (ownership.AppMatches). An app
// whose instances are all this cluster's own is not matched unless
// includeThisCluster, as a single import would import none of them. An
// app whose name lower-cased is no valid Service name is skipped and named
// (a single import with spec.service.name imports it). An EurekaImport of
// an app's name that the parent does not control (a single import made by
// hand, another pattern's) is never touched: the parent names it.
//
// An app that leaves Eureka, or that the pattern no longer matches, loses
// its import, and so its Service. While Eureka cannot be read, nothing is
// added or removed. Deleting the parent deletes its imports, whose
// finalizers remove their Services, and only then lets the parent go
// (its own finalizer): the owner references alone would need the garbage
// collector, and would let the parent go first.

// Reasons of a pattern import's conditions.
const (
	// reasonPatternImported: every matching app is imported and synced.
	reasonPatternImported = "Imported"
	// reasonNoMatchingApps: Eureka lists no app the pattern matches.
	reasonNoMatchingApps = "NoMatchingApps"
	// reasonPartlyImported: some matching apps are not (yet) imported and
	// synced; the message says which and why.
	reasonPartlyImported = "PartlyImported"
	// reasonAppsNotPermitted: the policy refuses some apps' imports.
	reasonAppsNotPermitted = "AppsNotPermitted"
	// reasonAppImported and reasonAppGone: Normal Events of the parent
	// when it makes or deletes an app's import.
	reasonAppImported = "AppImported"
	reasonAppGone     = "AppGone"
	reasonAppLeaving  = "AppLeaving"
)

// patternMatch is what a pattern finds in one registry read, without I/O.
type patternMatch struct {
	// apps are the matching apps, upper-cased and sorted.
	apps []string
	// children are the imports the parent wants, one per app with a valid
	// name, in the order of apps.
	children []*v1alpha1.EurekaImport
	// invalid are the matching apps whose name is no valid Service name.
	invalid []v1alpha1.SkippedApp
	// matched counts the apps the pattern matches, over the cap or not;
	// overCap are those left out for the cap, sorted.
	matched int
	overCap []string
}

// DefaultMaxPatternApps is how many apps one pattern import imports at
// most (Options.PatternCap, --max-pattern-apps): each is an import, a
// Service and its slices in the namespace, and Eureka's app names are
// anyone's to register.
const DefaultMaxPatternApps = 200

// patternCap is the cap on a pattern's apps, and the apps that keep their
// place under it: those the parent imports already, so that an app
// registered later, whatever its name, never takes a serving app's
// Service away.
type patternCap struct {
	max     int
	current func(app string) bool
}

// capApps keeps at most c.max of apps (sorted): the current ones first,
// then the others by name; it returns those kept, sorted, and those left
// out, sorted.
func (c patternCap) capApps(apps []string) (kept, left []string) {
	if c.max <= 0 || len(apps) <= c.max {
		return apps, nil
	}
	ranked := append([]string(nil), apps...)
	sort.SliceStable(ranked, func(i, j int) bool {
		ci, cj := c.current != nil && c.current(ranked[i]), c.current != nil && c.current(ranked[j])
		return ci && !cj
	})
	kept = append([]string(nil), ranked[:c.max]...)
	left = append([]string(nil), ranked[c.max:]...)
	sort.Strings(kept)
	sort.Strings(left)
	return kept, left
}

// patternChildName is the name of app's import, and whether it is a valid
// DefaultPatternAppGrace is how long an app that left Eureka keeps its
// import (Options.PatternAppGrace): a Eureka server restarted empty is
// refilled as its clients' next heartbeats find themselves unknown, well
// within it, and the apps' Services, and their ClusterIPs, stay.
const DefaultPatternAppGrace = 5 * time.Minute

// patternUnmatchedAnnotation on an app's import says since when (RFC 3339)
// its app has left Eureka or no longer matches; it goes once the app is
// back, and the import once it is older than the grace.
const patternUnmatchedAnnotation = "eurekube.io/unmatched-since"

// Service name (a DNS-1035 label: the Service is named the same).
func patternChildName(app string) (string, bool) {
	name := strings.ToLower(app)
	return name, len(validation.IsDNS1035Label(name)) == 0
}

// patternLabelValue is the ImportPatternLabel value naming parent: its
// name, or one shortened with a hash where a label value could not hold
// it.
func patternLabelValue(parent string) string {
	if len(validation.IsValidLabelValue(parent)) == 0 {
		return parent
	}
	sum := sha256.Sum256([]byte(parent))
	return strings.TrimRight(parent[:min(len(parent), 50)], "-._") + "-" + hex.EncodeToString(sum[:6])
}

// matchPattern finds the apps of a registry read that parent's pattern
// matches, and the import it wants for each. instancesOf lists an app's
// instances; clusterID is this cluster's, whose own instances the imports
// leave out unless includeThisCluster.
func matchPattern(parent *v1alpha1.EurekaImport, apps []string, instancesOf func(string) []eureka.Instance, clusterID string, limit patternCap) patternMatch {
	var m patternMatch
	sorted := append([]string(nil), apps...)
	for i := range sorted {
		sorted[i] = strings.ToUpper(sorted[i])
	}
	sort.Strings(sorted)
	var matched []string
	for n, app := range sorted {
		if n > 0 && sorted[n-1] == app || !ownership.AppMatches(parent.Spec.App, app) {
			continue
		}
		if len(importedInstances(parent, instancesOf(app), clusterID)) == 0 {
			continue // none to import: only this cluster's pods, or none
		}
		matched = append(matched, app)
	}
	m.matched = len(matched)
	matched, m.overCap = limit.capApps(matched)
	for _, app := range matched {
		m.apps = append(m.apps, app)
		name, ok := patternChildName(app)
		if !ok {
			m.invalid = append(m.invalid, v1alpha1.SkippedApp{App: app, Reason: v1alpha1.ReasonInvalidName,
				Message: fmt.Sprintf("%q is not a valid Service name (a letter first, then letters, digits and '-', at most 63): import %s with an EurekaImport of its own that sets spec.service.name", name, app)})
			continue
		}
		m.children = append(m.children, patternChild(parent, app, name))
	}
	return m
}

// overCapMessage says that pattern matched more apps than max, and which
// were left out.
func overCapMessage(pattern string, max int, m patternMatch) string {
	named := m.overCap[:min(len(m.overCap), maxNamedPods)]
	more := ""
	if n := len(m.overCap) - len(named); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("%s matches %s, more than the cap of %d (the manager's --max-pattern-apps): the %d imported are those imported already, then the first by name; left out: %s%s. "+
		"Narrow the pattern, import an app with an EurekaImport of its own, or ask the platform team to raise --max-pattern-apps",
		pattern, countApps(m.matched), max, len(m.apps), strings.Join(named, ", "), more)
}

// patternChild is the import parent wants for app: the parent's spec with
// the concrete app, the Service named after it.
func patternChild(parent *v1alpha1.EurekaImport, app, name string) *v1alpha1.EurekaImport {
	spec := parent.Spec.DeepCopy()
	spec.App = app
	spec.Service.Name = ""
	return &v1alpha1.EurekaImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: parent.Namespace, Name: name,
			Labels: map[string]string{v1alpha1.ImportPatternLabel: patternLabelValue(parent.Name)}},
		Spec: *spec,
	}
}

// patternActions is what the parent does to reach what it wants, given the
// imports of its namespace.
type patternActions struct {
	create []*v1alpha1.EurekaImport
	// update: its imports whose spec or label differ from the wanted,
	// already changed to it.
	update []*v1alpha1.EurekaImport
	// remove: its imports of apps no longer matched.
	remove []*v1alpha1.EurekaImport
	// kept: its imports that stay (updated or not), by name; not those
	// still to create.
	kept []*v1alpha1.EurekaImport
	// notOwned: apps whose name an import holds that the parent does not
	// control.
	notOwned []v1alpha1.SkippedApp
}

// planPatternActions compares the imports parent wants with existing, the
// imports of its namespace; it changes only copies.
func planPatternActions(parent *v1alpha1.EurekaImport, want []*v1alpha1.EurekaImport, existing []v1alpha1.EurekaImport) patternActions {
	var a patternActions
	byName := map[string]*v1alpha1.EurekaImport{}
	for i := range existing {
		byName[existing[i].Name] = &existing[i]
	}
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w.Name] = true
		got, ok := byName[w.Name]
		switch {
		case !ok:
			a.create = append(a.create, w)
		case got.UID == parent.UID && got.Name == parent.Name:
			a.notOwned = append(a.notOwned, v1alpha1.SkippedApp{App: w.Spec.App, Reason: v1alpha1.ReasonImportNotOwned,
				Message: fmt.Sprintf("its import would be named %s, this pattern import's own name: give the pattern import another name", w.Name)})
		case !metav1.IsControlledBy(got, parent):
			a.notOwned = append(a.notOwned, v1alpha1.SkippedApp{App: w.Spec.App, Reason: v1alpha1.ReasonImportNotOwned,
				Message: fmt.Sprintf("EurekaImport %s exists and is not this pattern's (%s): it is left as it is", w.Name, importOwner(got))})
		default:
			_, leaving := got.Annotations[patternUnmatchedAnnotation]
			if leaving || !equality.Semantic.DeepEqual(got.Spec, w.Spec) || got.Labels[v1alpha1.ImportPatternLabel] != w.Labels[v1alpha1.ImportPatternLabel] {
				got = got.DeepCopy()
				delete(got.Annotations, patternUnmatchedAnnotation) // the app is back
				got.Spec = w.Spec
				if got.Labels == nil {
					got.Labels = map[string]string{}
				}
				got.Labels[v1alpha1.ImportPatternLabel] = w.Labels[v1alpha1.ImportPatternLabel]
				a.update = append(a.update, got)
			}
			a.kept = append(a.kept, got)
		}
	}
	for i := range existing {
		if got := &existing[i]; !wanted[got.Name] && metav1.IsControlledBy(got, parent) {
			a.remove = append(a.remove, got)
		}
	}
	return a
}

// importOwner says whose an import is.
func importOwner(imp *v1alpha1.EurekaImport) string {
	if ref := metav1.GetControllerOf(imp); ref != nil {
		return fmt.Sprintf("it belongs to %s %s", ref.Kind, ref.Name)
	}
	if imp.IsPattern() {
		return "it is a pattern import"
	}
	return fmt.Sprintf("an import of %s of its own", imp.EffectiveApp())
}

// patternSummary is what the parent's status says of its imports.
type patternSummary struct {
	imported, refused, pending []string // apps, with a word of why for the last two
	ready, total               int32
}

// summarizeChildren reads the kept imports' statuses.
func summarizeChildren(kept []*v1alpha1.EurekaImport) patternSummary {
	var s patternSummary
	for _, c := range kept {
		app := c.EffectiveApp()
		permitted := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionPermitted)
		synced := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionSynced)
		current := c.Status.ObservedGeneration == c.Generation && c.DeletionTimestamp.IsZero()
		switch {
		case current && permitted != nil && permitted.Status == metav1.ConditionFalse:
			s.refused = append(s.refused, fmt.Sprintf("%s (%s)", app, permitted.Reason))
		case !current || synced == nil:
			s.pending = append(s.pending, fmt.Sprintf("%s (not reconciled yet)", app))
		case synced.Status != metav1.ConditionTrue:
			s.pending = append(s.pending, fmt.Sprintf("%s (%s)", app, synced.Reason))
		default:
			s.imported = append(s.imported, app)
		}
		if current {
			s.ready += c.Status.ReadyEndpoints
			s.total += c.Status.TotalEndpoints
		}
	}
	sort.Strings(s.imported)
	sort.Strings(s.refused)
	sort.Strings(s.pending)
	return s
}

// countApps is "1 app" or "n apps".
func countApps(n int) string {
	if n == 1 {
		return "1 app"
	}
	return fmt.Sprintf("%d apps", n)
}

// patternSynced is the parent's Synced condition: its status, reason and
// message, from what it matched, skipped and what its imports say.
func patternSynced(pattern string, m patternMatch, skipped []v1alpha1.SkippedApp, s patternSummary) (bool, string, string) {
	if len(m.apps) == 0 {
		return false, reasonNoMatchingApps, fmt.Sprintf("Eureka lists no app matching %s with instances to import: imports are made as apps register", pattern)
	}
	var parts []string
	if len(s.imported) > 0 {
		parts = append(parts, fmt.Sprintf("%s imported: %s", countApps(len(s.imported)), names(s.imported)))
	}
	if len(s.refused) > 0 {
		parts = append(parts, fmt.Sprintf("%d refused by the policy: %s", len(s.refused), names(s.refused)))
	}
	if len(s.pending) > 0 {
		parts = append(parts, fmt.Sprintf("%d not synced: %s", len(s.pending), names(s.pending)))
	}
	var invalid, notOwned []string
	for _, k := range skipped {
		if k.Reason == v1alpha1.ReasonInvalidName {
			invalid = append(invalid, k.App)
		} else {
			notOwned = append(notOwned, k.App)
		}
	}
	if len(invalid) > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped, the name lower-cased no valid Service name: %s", len(invalid), names(invalid)))
	}
	if len(notOwned) > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped, an EurekaImport of the name is not this pattern's: %s", len(notOwned), names(notOwned)))
	}
	msg := strings.Join(parts, "; ")
	if len(s.imported) == len(m.apps) {
		return true, reasonPatternImported, msg
	}
	return false, reasonPartlyImported, fmt.Sprintf("%d of %s matching %s: %s", len(s.imported), countApps(len(m.apps)), pattern, msg)
}

// reconcilePattern keeps a pattern import's imports, one per matching app.
func (r *importReconciler) reconcilePattern(ctx context.Context, imp *v1alpha1.EurekaImport) (reconcile.Result, error) {
	if !imp.DeletionTimestamp.IsZero() {
		return r.removePattern(ctx, imp)
	}
	if controllerutil.AddFinalizer(imp, importFinalizer) {
		if err := r.client.Update(ctx, imp); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	before := imp.Status.DeepCopy()
	st := &imp.Status
	st.ObservedGeneration, st.App = imp.Generation, imp.EffectiveApp()
	if st.Pattern == nil {
		st.Pattern = &v1alpha1.ImportPatternStatus{}
	}
	set := importConditionSetter(imp)

	// The Eureka servers are checked as a single import's are, before the
	// registry is read; each app's import is checked against the policy
	// by the single-app path.
	if err := r.opts.Defaults.CheckAllowed(importAsSyncer(imp)); err != nil {
		r.clients.release(client.ObjectKeyFromObject(importAsSyncer(imp))) // a refused import reads nothing
		set(v1alpha1.ConditionPermitted, false, reasonImportNotAllowed, err.Error())
		set(v1alpha1.ConditionSynced, false, reasonImportNotAllowed, "nothing is read, and the apps' imports are left as they are: see the Permitted condition")
		return r.finishImport(ctx, imp, before)
	}
	registry, err := r.readFollowed(ctx, imp)
	if err != nil {
		set(v1alpha1.ConditionEurekaReachable, false, reasonEurekaUnreachable, err.Error())
		set(v1alpha1.ConditionSynced, false, reasonEurekaUnreachable, "Eureka could not be read: the apps' imports are left as they are")
		r.recorder.Eventf(imp, nil, corev1.EventTypeWarning, reasonEurekaUnreachable, "Import", "%s", truncate(err.Error(), maxEventNote))
		return r.finishImport(ctx, imp, before)
	}
	set(v1alpha1.ConditionEurekaReachable, true, "Reachable", "Eureka answered")

	var existing v1alpha1.EurekaImportList
	if err := r.client.List(ctx, &existing, client.InNamespace(imp.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("list EurekaImports: %w", err)
	}
	current := map[string]bool{}
	for i := range existing.Items {
		if c := &existing.Items[i]; metav1.IsControlledBy(c, imp) && c.DeletionTimestamp.IsZero() {
			current[strings.ToUpper(c.Spec.App)] = true
		}
	}
	m := matchPattern(imp, registry.Apps(), registry.Instances, r.opts.ClusterID, patternCap{max: r.opts.PatternCap, current: func(app string) bool { return current[app] }})
	if len(m.overCap) > 0 {
		set(v1alpha1.ConditionAppsWithinCap, false, v1alpha1.ReasonPatternCapReached, overCapMessage(imp.Spec.App, r.opts.PatternCap, m))
	} else {
		set(v1alpha1.ConditionAppsWithinCap, true, "WithinCap", fmt.Sprintf("%s matches %s, within the cap of %d (--max-pattern-apps)", imp.Spec.App, countApps(m.matched), r.opts.PatternCap))
	}
	a := planPatternActions(imp, m.children, existing.Items)
	for _, c := range a.create {
		if err := controllerutil.SetControllerReference(imp, c, r.client.Scheme()); err != nil {
			return reconcile.Result{}, err
		}
		switch err := r.client.Create(ctx, c); {
		case apierrors.IsAlreadyExists(err):
			// Made since the cache was filled: the next pass sees it.
		case err != nil:
			return reconcile.Result{}, fmt.Errorf("create EurekaImport %s: %w", c.Name, err)
		default:
			r.recorder.Eventf(imp, c, corev1.EventTypeNormal, reasonAppImported, "Import", "app %s matches %s: EurekaImport %s made", c.Spec.App, imp.Spec.App, c.Name)
		}
	}
	for _, c := range a.update {
		if err := r.client.Update(ctx, c); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("update EurekaImport %s: %w", c.Name, err)
		}
	}
	for _, c := range a.remove {
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		// Not at once: a server restarted empty, or an app between two
		// deployments, would cost every Service its ClusterIP.
		since, err := time.Parse(time.RFC3339, c.Annotations[patternUnmatchedAnnotation])
		if err != nil { // not marked yet (or marked by hand with no time)
			marked := c.DeepCopy()
			metav1.SetMetaDataAnnotation(&marked.ObjectMeta, patternUnmatchedAnnotation, time.Now().UTC().Format(time.RFC3339))
			if err := r.client.Update(ctx, marked); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("mark EurekaImport %s: %w", c.Name, err)
			}
			r.recorder.Eventf(imp, c, corev1.EventTypeNormal, reasonAppLeaving, "Import", "app %s no longer matches %s or left Eureka: EurekaImport %s (and its Service) is kept %s in case it comes back",
				c.Spec.App, imp.Spec.App, c.Name, r.opts.PatternAppGrace)
			continue
		}
		if time.Since(since) < r.opts.PatternAppGrace {
			continue // this parent is reconciled after each registry read
		}
		if err := r.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete EurekaImport %s: %w", c.Name, err)
		}
		r.recorder.Eventf(imp, c, corev1.EventTypeNormal, reasonAppGone, "Import", "app %s no longer matches %s or left Eureka: EurekaImport %s deleted", c.Spec.App, imp.Spec.App, c.Name)
	}

	skipped := append(append([]v1alpha1.SkippedApp(nil), m.invalid...), a.notOwned...)
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].App < skipped[j].App })
	s := summarizeChildren(a.kept)
	for _, c := range a.create {
		s.pending = append(s.pending, c.Spec.App+" (import just made)")
	}
	sort.Strings(s.pending)
	imports := make([]string, 0, len(a.kept)+len(a.create))
	for _, c := range append(append([]*v1alpha1.EurekaImport(nil), a.kept...), a.create...) {
		imports = append(imports, c.Name)
	}
	sort.Strings(imports)
	st.Pattern = &v1alpha1.ImportPatternStatus{Apps: m.apps, Imports: imports, Skipped: skipped}
	st.ServiceName = ""
	switch n := len(imports); n {
	case 0:
	case 1:
		st.ServiceName = "1 Service"
	default:
		st.ServiceName = fmt.Sprintf("%d Services", n)
	}
	st.ReadyEndpoints, st.TotalEndpoints = s.ready, s.total
	st.Endpoints = fmt.Sprintf("%d/%d", s.ready, s.total)

	if len(s.refused) > 0 {
		set(v1alpha1.ConditionPermitted, false, reasonAppsNotPermitted, fmt.Sprintf("the policy refuses %d of %s matching %s: %s; each one's import says why in its Permitted condition",
			len(s.refused), countApps(len(m.apps)), imp.Spec.App, names(s.refused)))
	} else {
		set(v1alpha1.ConditionPermitted, true, v1alpha1.ReasonPermitted, "the Eureka servers are allowed, and the policy refuses no matching app's import")
	}
	ok, reason, msg := patternSynced(imp.Spec.App, m, skipped, s)
	set(v1alpha1.ConditionSynced, ok, reason, msg)
	readAt := metav1.NewTime(registry.ReadAt().Truncate(time.Second))
	if lastSyncDue(st.LastSyncTime, readAt.Time, r.leader.since(), imp.UID) || !equality.Semantic.DeepEqual(before, st) {
		st.LastSyncTime = &readAt
	}
	return r.finishImport(ctx, imp, before)
}

// removePattern deletes a deleted pattern import's imports, and lets it go
// once they are gone (their finalizers remove their Services first). Their
// deletions bring it back here.
func (r *importReconciler) removePattern(ctx context.Context, imp *v1alpha1.EurekaImport) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(imp)
	r.follow.forget(key)
	// Read from the API server, not the cache: an import made by the
	// pass before the deletion, and not cached yet, must not be missed.
	var existing v1alpha1.EurekaImportList
	if err := r.apiReader.List(ctx, &existing, client.InNamespace(imp.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("list EurekaImports: %w", err)
	}
	left := 0
	for i := range existing.Items {
		c := &existing.Items[i]
		if !metav1.IsControlledBy(c, imp) {
			continue
		}
		left++
		if c.DeletionTimestamp.IsZero() {
			if err := r.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("delete EurekaImport %s: %w", c.Name, err)
			}
		}
	}
	if left > 0 {
		// Each deletion of one brings the parent back; the requeue is
		// a backstop.
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
	}
	if controllerutil.RemoveFinalizer(imp, importFinalizer) {
		if err := r.client.Update(ctx, imp); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
	}
	r.log.WithFields(map[string]any{"namespace": imp.Namespace, "import": imp.Name}).Info("pattern import deleted: its apps' imports and their Services removed")
	return reconcile.Result{}, nil
}
