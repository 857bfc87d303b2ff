package cli

import "context"

func runUninstall(context.Context, *env, []string) error { return nil }
