// Command cert-manager-controller runs cert-manager's own controllers (github.com/cert-manager/cert-manager,
// the served module) against the lab's API server.
//
// Upstream's main lives in cmd/controller, a separate Go module that the module proxy does not serve, so
// this small main does what upstream's cmd/controller/app does for the controllers the lab needs: it builds
// cert-manager's ContextFactory, constructs every controller registered by the imports below, starts the
// shared informers and runs the controllers until SIGTERM. The controllers are upstream's code, unchanged:
// issuers and clusterissuers (Ready conditions), the certificates-* family (the trigger decides whether a
// Certificate is re-issued), CertificateRequest approval, and the CA and self-signed issuers and signers. ACME, Vault,
// Venafi and the ingress/gateway shims are left out: the lab has nothing for them to talk to.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"k8s.io/klog/v2"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to run against")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets that ClusterIssuers refer to")
	healthz := flag.String("healthz-address", "127.0.0.1:0", "address of the /healthz endpoint")
	workers := flag.Int("workers", 5, "workers per controller")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	logf.InitLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace, *healthz, *workers); err != nil {
		klog.ErrorS(err, "cert-manager-controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterResourceNamespace, healthz string, workers int) error {
	opts := controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: controllerpkg.CertificateOptions{
			// upstream's defaults (internal/apis/config/controller/v1alpha1/defaults.go)
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controllerpkg.SchedulerOptions{MaxConcurrentChallenges: 60},
	}
	factory, err := controllerpkg.NewContextFactory(ctx, opts)
	if err != nil {
		return err
	}
	shared, err := factory.Build()
	if err != nil {
		return err
	}

	names := make([]string, 0, len(controllerpkg.Known()))
	for name := range controllerpkg.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	controllers := make(map[string]controllerpkg.Interface, len(names))
	for _, name := range names {
		iface, err := controllerpkg.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("constructing controller %s: %w", name, err)
		}
		controllers[name] = iface
	}

	// informers are registered lazily by the constructors above, so they start only now
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	var ready atomic.Bool
	serveHealthz(healthz, &ready)

	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	for name, iface := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			klog.InfoS("starting controller", "controller", name)
			if err := iface.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
			}
		}()
	}
	shared.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())
	shared.SharedInformerFactory.WaitForCacheSync(ctx.Done())
	ready.Store(true)
	klog.InfoS("cert-manager controllers running", "controllers", names)

	wg.Wait()
	close(errs)
	return <-errs
}

// serveHealthz answers /healthz with 200 once the informers' caches have synced (the lab waits for it).
func serveHealthz(address string, ready *atomic.Bool) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	server := &http.Server{Addr: address, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			klog.ErrorS(err, "healthz server failed")
			os.Exit(1)
		}
	}()
}
