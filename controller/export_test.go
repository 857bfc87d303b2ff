package controller

// ForgetImportMetrics drops an import's gauges, as a restarted manager
// starts without them (for the suite in package controller_test).
var ForgetImportMetrics = forgetImportMetrics

// ForgetSyncerMetrics drops a syncer's gauges, as a restarted manager
// starts without them.
var ForgetSyncerMetrics = forgetMetrics
