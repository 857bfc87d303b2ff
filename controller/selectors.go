package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// selectors keeps each syncer's parsed pod selector for its generation:
// every pod event of a namespace asks each of its syncers whether it
// selects the pod (syncersOfPod), 20,000 times at the start of a
// cluster of 20,000 pods, and parsing a selector validates each label
// with regular expressions.
type selectors struct {
	byName sync.Map // types.NamespacedName → parsedSelector
}

type parsedSelector struct {
	uid        types.UID
	generation int64
	selector   labels.Selector
	err        error
}

// of is s's pod selector (v1alpha1.EurekaSyncer.PodSelector), parsed once
// per generation.
func (m *selectors) of(s *v1alpha1.EurekaSyncer) (labels.Selector, error) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if v, ok := m.byName.Load(key); ok {
		if p := v.(parsedSelector); p.uid == s.UID && p.generation == s.Generation {
			return p.selector, p.err
		}
	}
	sel, err := s.PodSelector()
	m.byName.Store(key, parsedSelector{uid: s.UID, generation: s.Generation, selector: sel, err: err})
	return sel, err
}

// forget drops what is kept of a syncer that is gone.
func (m *selectors) forget(key types.NamespacedName) { m.byName.Delete(key) }
