//go:build tools

// Package tools records the one upstream command this module exists to build (kube-apiserver of another
// Kubernetes release than gomod/lab's), so "go mod tidy" keeps what it needs in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
