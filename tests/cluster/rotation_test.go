package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// A team rotates its Eureka password: the server takes the new one, then
// the Secret is updated. The pods' registrars read the mounted files the
// kubelet refreshes and register again, and the manager follows the Secret:
// no pod is restarted. The team's server is its own, on the node's
// address, which the installed manager allows (cluster.AllowNodeEureka).
func TestRotation_PodsFollowARotatedEurekaPasswordWithoutARestart(t *testing.T) {
	story(t, 160*time.Second)
	ctx := context.Background()
	first := &harness.EurekaAuth{Username: "eureka", Password: "first-password"}
	server, err := harness.StartEureka(ctx, harness.EurekaOptions{Host: node.NodeIP, Auth: first, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop() }) // after the syncer's detach below, which reads it

	app := cluster.App{Namespace: "vault", Name: "vault", Replicas: 2, DrainSeconds: ptr.To[int32](5)}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: "eureka-creds",
		Labels: map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}}, // its consent: the manager uses it
		StringData: map[string]string{"username": first.Username, "password": first.Password}}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app.Namespace, Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}},
		creds,
		// The grant docs/operations.md tells users to make.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: "eurekube-eureka-credentials"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eurekube-eureka-credentials"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: cluster.ManagerNamespace, Name: cluster.ManagerDeployment}}},
		builders.Syncer(app.Namespace, app.Name, builders.EurekaURLs(server.URL()), builders.Credentials(creds.Name), builders.Drain(*app.DrainSeconds)),
	} {
		if err := c.Node.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	t.Cleanup(func() { // before the server stops: the pods cancel with the password they last read
		dropNamespace(t, app.Namespace)
		waitNamespaceGone(t, app.Namespace)
	})
	// The Deployment; the syncer above stays.
	deploy(t, app, nil)
	waitUpWith(t, server, first, app)
	pods := podUIDs(t, app)

	t.Log("the server takes a new password; then the Secret follows")
	second := &harness.EurekaAuth{Username: "eureka", Password: "second-password"}
	server.SetAuth(second)
	restartCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := server.Restart(restartCtx); err != nil {
		t.Fatal(err)
	}
	creds.StringData = map[string]string{"username": second.Username, "password": second.Password}
	if err := c.Node.Client.Update(ctx, creds); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	waitUpWith(t, server, second, app)
	t.Logf("both pods UP again %s after the Secret changed (the kubelet refreshes the mounted files, the registrars read them)", time.Since(changed).Round(time.Second))
	if now := podUIDs(t, app); fmt.Sprint(now) != fmt.Sprint(pods) {
		t.Fatalf("pods %v became %v: a rotation must not restart them", pods, now)
	}
	harness.Eventually(t, 3*time.Minute, "the manager reads Eureka with the new password", func() error {
		s := syncer(t, app)
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionEurekaReachable); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != s.Generation {
			return fmt.Errorf("EurekaReachable %+v", c)
		}
		if s.Status.UpInstances != 2 {
			return fmt.Errorf("status counts %d UP, want 2", s.Status.UpInstances)
		}
		return nil
	})
}

// waitUpWith waits until the server, read with auth, lists every ready pod
// of app UP.
func waitUpWith(t *testing.T, server *harness.Eureka, auth *harness.EurekaAuth, app cluster.App) {
	t.Helper()
	reader, err := eureka.New(eureka.Options{URLs: []string{server.URL()}, Username: auth.Username, Password: auth.Password, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 5*time.Minute, fmt.Sprintf("%d pods UP in Eureka read with password %q", app.Replicas, auth.Password), func() error {
		insts, err := reader.Instances(context.Background(), app.Name)
		if err != nil {
			return err
		}
		up := 0
		for _, in := range insts {
			if in.Status == eureka.StatusUp {
				up++
			}
		}
		if up != int(app.Replicas) {
			return fmt.Errorf("%d of %d instances UP", up, len(insts))
		}
		return nil
	})
}

func podUIDs(t *testing.T, app cluster.App) []string {
	t.Helper()
	var pods corev1.PodList
	if err := c.Node.Client.List(context.Background(), &pods, client.InNamespace(app.Namespace), client.MatchingLabels{"app": app.Name}); err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, string(p.UID))
		}
	}
	return uids
}
