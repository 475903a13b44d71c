// cert-manager runs cert-manager's own controllers (those registered by the packages imported
// below, from github.com/cert-manager/cert-manager) the way its cmd/controller/app does, reduced
// to what the tests need: no leader election, no metrics, healthz or webhook, one namespace or all,
// CA and self-signed issuers only.
//
//	cert-manager --kubeconfig <file> [--master <url>] [--namespace <ns>] [--controllers a,b,...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each registers itself with controller.Register in init().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// The issuer implementations the issuers controller sets up (as cmd/controller/app/start.go
	// imports them), here only CA and self-signed.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers run when --controllers is not given: all of the above.
const defaultControllers = "certificates-trigger,certificates-issuing,certificates-key-manager," +
	"certificates-request-manager,certificates-readiness,certificates-revision-manager," +
	"certificaterequests-approver,certificaterequests-issuer-ca," +
	"certificaterequests-issuer-selfsigned,issuers"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	master := flag.String("master", "", "the API server's URL (overrides the kubeconfig's)")
	namespace := flag.String("namespace", "", "the one namespace to watch (default: all)")
	names := flag.String("controllers", defaultControllers, "comma-separated controllers to run")
	workers := flag.Int("workers", 5, "workers per controller")
	klog.InitFlags(nil)
	flag.Parse()

	logf.InitLogs()
	defer logf.FlushLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *master, *namespace, *names, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager:", err)
		os.Exit(1)
	}
}

func run(rootCtx context.Context, kubeconfig, master, namespace, names string, workers int) error {
	log := logf.FromContext(rootCtx)
	// The values cmd/controller's configuration defaults to.
	factory, err := controller.NewContextFactory(rootCtx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		APIServerHost:      master,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        "kube-system",
			ClusterIssuerAmbientCredentials: true,
		},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: 60},
	})
	if err != nil {
		return err
	}
	ctx, err := factory.Build()
	if err != nil {
		return err
	}
	known := controller.Known()
	var enabled []string
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if _, ok := known[n]; !ok {
			var all []string
			for k := range known {
				all = append(all, k)
			}
			sort.Strings(all)
			return fmt.Errorf("unknown controller %q (known: %s)", n, strings.Join(all, ", "))
		}
		enabled = append(enabled, n)
	}
	log.Info("starting cert-manager controllers", "controllers", enabled)

	g, gctx := errgroup.WithContext(rootCtx)
	for _, n := range enabled {
		iface, err := known[n](factory)
		if err != nil {
			return fmt.Errorf("constructing controller %s: %w", n, err)
		}
		g.Go(func() error { return iface.Run(workers, gctx) })
	}
	ctx.SharedInformerFactory.Start(gctx.Done())
	ctx.KubeSharedInformerFactory.Start(gctx.Done())
	ctx.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())
	err = g.Wait()
	ctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	ctx.KubeSharedInformerFactory.Shutdown()
	ctx.SharedInformerFactory.Shutdown()
	return err
}
