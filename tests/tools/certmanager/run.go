package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// run starts cert-manager's controllers and the cainjector and returns when
// ctx ends (nil) or either fails. /readyz passes once the informers of both
// have synced, so anything created after that is seen.
func run(ctx context.Context, o options) error {
	g, ctx := errgroup.WithContext(ctx)
	controllersNotSynced, err := startControllers(ctx, g, o)
	if err != nil {
		return err
	}
	injector, err := newCAInjector(ctx, o)
	if err != nil {
		return err
	}
	var injectorSynced atomic.Bool
	started := time.Now()
	g.Go(func() error {
		if injector.GetCache().WaitForCacheSync(ctx) {
			injectorSynced.Store(true)
			logr.FromContextOrDiscard(ctx).Info("the cainjector's cache has synced", "after", time.Since(started).String())
		}
		return nil
	})
	if err := injector.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := injector.AddReadyzCheck("informers", func(*http.Request) error {
		var notSynced []error
		if names := controllersNotSynced(); len(names) > 0 {
			notSynced = append(notSynced, fmt.Errorf("the controllers' informers of %s have not synced", strings.Join(names, ", ")))
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
