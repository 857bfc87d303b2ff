package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// run starts cert-manager's controllers and the cainjector and returns when
// ctx ends (nil) or either fails. /readyz passes once the informers of both
// have synced, so anything created after that is seen.
func run(ctx context.Context, o options) error {
	g, ctx := errgroup.WithContext(ctx)
	controllersSynced, err := startControllers(ctx, g, o)
	if err != nil {
		return err
	}
	injector, err := newCAInjector(ctx, o)
	if err != nil {
		return err
	}
	var injectorSynced atomic.Bool
	g.Go(func() error {
		injectorSynced.Store(injector.GetCache().WaitForCacheSync(ctx))
		return nil
	})
	if err := injector.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := injector.AddReadyzCheck("informers", func(*http.Request) error {
		var notSynced []error
		if !controllersSynced.Load() {
			notSynced = append(notSynced, errors.New("the controllers' informers have not synced"))
		}
		if !injectorSynced.Load() {
			notSynced = append(notSynced, errors.New("the cainjector's cache has not synced"))
		}
		return errors.Join(notSynced...)
	}); err != nil {
		return err
	}
	g.Go(func() error {
		if err := injector.Start(ctx); err != nil {
			return fmt.Errorf("cainjector: %w", err)
		}
		return nil
	})
	return g.Wait()
}
