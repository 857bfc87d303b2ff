package webhook

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// selects is s.Selects(podLabels) with the syncer's selector compiled once
// rather than for every pod: EurekaSyncer.PodSelector builds and validates
// a labels.Selector from the spec, several allocations per syncer of the
// namespace per admission. The compiled selectors are kept by the
// selector's content, so an edited syncer (a new content) compiles again
// and nothing depends on which object the cache handed out.
func selects(s *v1alpha1.EurekaSyncer, podLabels map[string]string) (bool, error) {
	sel, err := compiledSelectors.get(s)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(podLabels)), nil
}

// compiledSelectors is every pod selector the webhook met, up to
// maxCompiledSelectors of them.
var compiledSelectors = selectorCache{compiled: map[string]compiledSelector{}}

// maxCompiledSelectors bounds the cache: past it, it starts again empty. A
// cluster has a selector per syncer, and a syncer's selector seldom changes.
const maxCompiledSelectors = 4096

type selectorCache struct {
	mu       sync.RWMutex
	compiled map[string]compiledSelector
}

// compiledSelector is what EurekaSyncer.PodSelector returned: a selector
// (immutable, safe to match from any goroutine) or why it is invalid.
type compiledSelector struct {
	selector labels.Selector
	err      error
}

func (c *selectorCache) get(s *v1alpha1.EurekaSyncer) (labels.Selector, error) {
	key := selectorKey(&s.Spec.Selector)
	c.mu.RLock()
	hit, ok := c.compiled[key]
	c.mu.RUnlock()
	if ok {
		return hit.selector, hit.err
	}
	sel, err := s.PodSelector()
	c.mu.Lock()
	if len(c.compiled) >= maxCompiledSelectors {
		clear(c.compiled)
	}
	c.compiled[key] = compiledSelector{selector: sel, err: err}
	c.mu.Unlock()
	return sel, err
}

// selectorKey is the content of sel, one string per content: every string
// is written after its length, the labels in the order of their keys, the
// expressions in theirs.
func selectorKey(sel *metav1.LabelSelector) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	b.WriteString(strconv.Itoa(len(sel.MatchLabels)))
	b.WriteByte('L')
	if len(sel.MatchLabels) == 1 {
		for k, v := range sel.MatchLabels {
			field(k)
			field(v)
		}
	} else {
		for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
			field(k)
			field(sel.MatchLabels[k])
		}
	}
	b.WriteString(strconv.Itoa(len(sel.MatchExpressions)))
	b.WriteByte('E')
	for _, e := range sel.MatchExpressions {
		field(e.Key)
		field(string(e.Operator))
		b.WriteString(strconv.Itoa(len(e.Values)))
		b.WriteByte('V')
		for _, v := range e.Values {
			field(v)
		}
	}
	return b.String()
}
