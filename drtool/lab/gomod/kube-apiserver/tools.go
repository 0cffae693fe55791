//go:build tools

// Package tools records the command this module exists to build, so that
// "go mod tidy" keeps every module k8s.io/kubernetes/cmd/kube-apiserver needs
// in go.mod/go.sum. The build tag keeps it out of every real build.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
