package cli

import "context"

func runCheck(context.Context, *env, []string) error     { return nil }
func runUninstall(context.Context, *env, []string) error { return nil }
