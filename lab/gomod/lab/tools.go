//go:build tools

// Package tools records the upstream commands this module exists to build, so that "go mod tidy"
// keeps every module they need in go.mod/go.sum. The build tag keeps it out of every real build.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
