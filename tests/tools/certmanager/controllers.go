package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"golang.org/x/sync/errgroup"

	"github.com/cert-manager/cert-manager/pkg/controller"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuers controllers find the issuer implementations in a registry
	// these packages fill in their init.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// enabledControllers are the cert-manager controllers that issue
// certificates from SelfSigned and CA issuers: the Certificate lifecycle
// (trigger → keymanager → requestmanager → approval → signing → issuing →
// readiness, old requests pruned by revisionmanager) and the issuers'
// Ready conditions. Each package registers its constructor in init.
var enabledControllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	crapprover.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// startControllers builds the enabled controllers, runs them in g and
// starts their shared informers, as cert-manager's controller binary does
// without leader election, metrics and ACME. The returned function names
// the informers that have not synced yet (none once every one has).
func startControllers(ctx context.Context, g *errgroup.Group, o options) (func() []string, error) {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: o.clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: o.certificateRequestMinimumBackoff,
			CertificateRequestMaximumBackoffDuration: o.certificateRequestMaximumBackoff,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("controllers: %w", err)
	}
	// Every controller's context shares these informer factories.
	shared, err := factory.Build()
	if err != nil {
		return nil, fmt.Errorf("controllers: %w", err)
	}
	known := controller.Known()
	for _, name := range enabledControllers {
		construct, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("controllers: %s is not registered by the cert-manager module", name)
		}
		c, err := construct(factory)
		if err != nil {
			return nil, fmt.Errorf("controllers: %s: %w", name, err)
		}
		g.Go(func() error {
			if err := c.Run(o.workers, ctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	started := time.Now()
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	// notSynced asks each started informer once, without waiting: a
	// closed channel stops WaitForCacheSync after its first check.
	closed := make(chan struct{})
	close(closed)
	notSynced := func() []string {
		var names []string
		for typ, ok := range shared.SharedInformerFactory.WaitForCacheSync(closed) {
			if !ok {
				names = append(names, typ.String())
			}
		}
		for name, ok := range shared.KubeSharedInformerFactory.WaitForCacheSync(closed) {
			if !ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	log := logr.FromContextOrDiscard(ctx)
	// A sync takes milliseconds even on a busy machine; one that has not
	// finished says every 15 s which informers it still waits for, so a
	// start that hangs is explained by its log.
	g.Go(func() error {
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				names := notSynced()
				if len(names) == 0 {
					return nil
				}
				log.Info("the controllers' informers have not synced yet", "waiting", names, "after", time.Since(started).String())
			}
		}
	})
	g.Go(func() error {
		synced := shared.SharedInformerFactory.WaitForCacheSync(ctx.Done())
		kube := shared.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())
		if ctx.Err() == nil {
			log.Info("the controllers' informers have synced", "informers", len(synced)+len(kube), "after", time.Since(started).String())
		}
		return nil
	})
	return notSynced, nil
}
