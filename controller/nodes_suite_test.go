package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// A node that stops being Ready (its kubelet silent) takes its pods'
// instances out of traffic, which Eureka alone would keep UP for minutes,
// and they come back when it is Ready again.
func TestTraffic_APodOnANodeThatIsNotReadyIsHeldOutUntilItIsReady(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	setReady := func(status corev1.ConditionStatus) {
		t.Helper()
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if err := k8s.Status().Update(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	setReady(corev1.ConditionTrue)
	s := newSyncer(t, ns, "orders")
	c := directClient(t, server.URL())
	p := podShape{ns: ns, app: "orders", name: "lost-1", ip: "10.0.2.1", ready: true, registrar: true, node: node.Name,
		annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: "orders", v1alpha1.DrainAnnotation: "100"}}
	elsewhere := podShape{ns: ns, app: "orders", name: "lost-2", ip: "10.0.2.2", ready: true, registrar: true,
		annotations: p.annotations}
	lost, fine := register(t, c, s, p.create(t)), register(t, c, s, elsewhere.create(t))

	setReady(corev1.ConditionUnknown) // the node controller's verdict on a silent kubelet
	harness.Eventually(t, patience, "the lost node's instance OUT_OF_SERVICE, the other UP", func() error {
		return wantStatuses(c, map[string]eureka.Status{lost.InstanceID: eureka.StatusOutOfService, fine.InstanceID: eureka.StatusUp}, lost, fine)
	})
	harness.Eventually(t, patience, "TrafficApplied names the pod and its node", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		if err := trafficCondition(got.Status, "NodeNotReady"); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTrafficApplied); !strings.Contains(c.Message, "lost-1 on "+node.Name) {
			return fmt.Errorf("message %q does not name the pod and node", c.Message)
		}
		return nil
	})

	setReady(corev1.ConditionTrue)
	harness.Eventually(t, patience, "both UP once the node is Ready again", func() error {
		return wantStatuses(c, map[string]eureka.Status{lost.InstanceID: eureka.StatusUp, fine.InstanceID: eureka.StatusUp}, lost, fine)
	})
}
