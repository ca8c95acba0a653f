//go:build !windows

package main

import "context"

// serviceAction is never reached off Windows: runService answers with the
// platform's own mechanism first.
func serviceAction(ctx context.Context, e *env, action, data string, dataSet bool, daemonFlags []string) error {
	return &usageError{msg: "danyue service " + action + " is for Windows", hint: "danyue service"}
}
