package cli

import "context"

func runStatus(context.Context, *env, []string) error    { return nil }
func runCheck(context.Context, *env, []string) error     { return nil }
func runUninstall(context.Context, *env, []string) error { return nil }
