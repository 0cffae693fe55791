//go:build tools

// Package tools records the upstream command this module exists to build, so that "go mod tidy" keeps
// every module it needs in go.mod/go.sum. The build tag keeps it out of every real build.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
