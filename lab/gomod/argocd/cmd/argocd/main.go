// Command argocd is Argo CD's one binary cut to what the lab runs: the application controller and the
// repo-server (and the git-ask-pass helper the repo-server runs for Git credentials), chosen by the name it
// runs as or ARGOCD_BINARY_NAME, as upstream's cmd/main.go does. Upstream's main also links its API server,
// CLI, ApplicationSet controller (with every SCM provider's SDK), notifications, Dex, commit and CMP servers,
// which the lab never starts: about a fifth of the Go source a cold build compiles (docs/lab-builds.md, "Argo CD").
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	gitaskpass "github.com/argoproj/argo-cd/v3/cmd/argocd-git-ask-pass/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	// as upstream's main: klog logs through Argo CD's configured logger
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	// Upstream's main calls grpc.DisableSRVLookups here, which panics unless something set gRPC's
	// EnableSRVLookups: only the grpclb balancer's init does, and this cut does not link it (upstream's does,
	// through a cloud SDK), so the DNS SRV lookups that workaround turns off are off already.
	name := filepath.Base(os.Args[0])
	if val := os.Getenv("ARGOCD_BINARY_NAME"); val != "" {
		name = val
	}
	var command *cobra.Command
	switch name {
	case common.CommandApplicationController:
		command = appcontroller.NewCommand()
	case common.CommandRepoServer:
		command = reposerver.NewCommand()
	case common.CommandGitAskPass:
		command = gitaskpass.NewCommand()
		command.SilenceErrors, command.SilenceUsage = true, true
	default:
		fmt.Fprintf(os.Stderr, "argocd (lab build): %q is not built in; run as %s or %s (ARGOCD_BINARY_NAME)\n",
			name, common.CommandApplicationController, common.CommandRepoServer)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
