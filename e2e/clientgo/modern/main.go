// Command clientgo-modern runs what today's controllers built with client-go 0.32 do against an
// API server, one checked scenario at a time, and exits non-zero on the first scenario that
// fails (issue 29). tools/clientgo-modern builds it from Debian trixie's client-go 0.32 in GOPATH
// mode; e2e/clientgo/clientgo_modern_e2e_test.py runs it against the embedded API server, with
// client-go's WatchListClient feature on and off (KUBE_FEATURE_WatchListClient).
//
//	clientgo-modern -kubeconfig FILE -namespace NS -scenario informer
//
// Every scenario prints "PASS <scenario>: <what held>" or "FAIL <scenario>: <why>".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// env is what every scenario gets.
type env struct {
	config    *rest.Config
	client    kubernetes.Interface
	namespace string
	timeout   time.Duration
}

type scenario func(ctx context.Context, e *env) (string, error)

// For the leasepeer scenario. Neither it nor relist (which needs a server that compacts fast) is
// part of "all".
var (
	leaseName = flag.String("lease-name", "", "leasepeer: the Lease to campaign for")
	identity  = flag.String("identity", "clientgo-peer", "leasepeer: this candidate's identity")
	hold      = flag.Duration("hold", 5*time.Second, "leasepeer: how long to lead before releasing")
)

var scenarios = map[string]scenario{
	"informer":       informerScenario,
	"dynamic":        dynamicScenario,
	"metadata":       metadataScenario,
	"protobuf":       protobufScenario,
	"apply":          applyScenario,
	"leaderelection": leaderElectionScenario,
	"list":           listScenario,
	"events":         eventsScenario,
	"watchlist":      watchListScenario,
	"leasepeer":      leasePeerScenario,
	"status":         statusScenario,
	"scale":          scaleScenario,
	"relist":         relistScenario,
}

func names() []string {
	var out []string
	for name := range scenarios {
		if name != "leasepeer" && name != "relist" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server (required)")
	namespace := flag.String("namespace", "default", "namespace the scenarios work in (created if missing)")
	which := flag.String("scenario", "all", "scenario to run: all, or one of "+strings.Join(names(), ", "))
	timeout := flag.Duration("timeout", 60*time.Second, "bound of each wait of a scenario")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "clientgo-modern: -kubeconfig is required")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientgo-modern: %v\n", err)
		os.Exit(2)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientgo-modern: %v\n", err)
		os.Exit(2)
	}
	e := &env{config: config, client: client, namespace: *namespace, timeout: *timeout}
	run := names()
	if *which != "all" {
		if _, ok := scenarios[*which]; !ok {
			fmt.Fprintf(os.Stderr, "clientgo-modern: unknown scenario %q (%s)\n", *which, strings.Join(names(), ", "))
			os.Exit(2)
		}
		run = []string{*which}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := ensureNamespace(ctx, e); err != nil {
		fmt.Printf("FAIL setup: %v\n", err)
		os.Exit(1)
	}
	failed := 0
	for _, name := range run {
		what, err := scenarios[name](ctx, e)
		if err != nil {
			fmt.Printf("FAIL %s: %v\n", name, err)
			failed++
			continue
		}
		fmt.Printf("PASS %s: %s\n", name, what)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
