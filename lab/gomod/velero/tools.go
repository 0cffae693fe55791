//go:build tools

// Package tools records the upstream commands this module exists to build, so that "go mod tidy" keeps
// every module they need in go.mod/go.sum. The build tag keeps it out of every real build.
package tools

import (
	_ "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"
	_ "github.com/vmware-tanzu/velero/cmd/velero"
)
