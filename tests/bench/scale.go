package bench

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/tests/harness"
)

type Scenario struct {
	Name                                           string
	Namespaces, SyncersPerNamespace, PodsPerSyncer int
	Target                                         bool
}

type ScaleOptions struct {
	Eureka         *harness.Eureka
	WorkDir        string
	Scenario       Scenario
	ResyncPeriod   time.Duration
	ResyncsCounted int
	Log            logrus.FieldLogger
}

func MeasureScale(ctx context.Context, o ScaleOptions, r *Results) error {
	return errors.New("todo")
}
