// The client-go baseline of the shared-cache and cache-memory benchmarks (bench/README.md): a
// small informer-based controller written the usual way, against the client-go vendored in the
// Kubernetes 1.20.2 tree that tools/kubernetes builds (bench/shared_cache/clientgo/build makes
// the binary).
//
//	clientgo-baseline controller --kubeconfig=PATH --crd=GROUP/VERSION/RESOURCE
//	    One shared informer factory for ConfigMaps, Secrets and Deployments (all namespaces), a
//	    dynamic one for the custom resource, a rate-limited work queue fed by their event
//	    handlers and 2 workers whose reconcile reads the object from the lister and does nothing.
//	    Prints "synced SECONDS" (since the process started) once every cache has synced, then
//	    "idle RECONCILES" each time its queue has been drained after that, and runs until
//	    SIGTERM/SIGINT.
//
//	clientgo-baseline memory --kubeconfig=PATH --kind=configmaps|podlikes --namespace=NS
//	    One informer holding typed objects (ConfigMaps; or the benchmark's PodLike custom
//	    resources decoded as typed Pods), synced, then the Go heap in use before and after (after
//	    a forced GC): prints "objects N" and "heap_bytes B".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeobj "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

var started = time.Now()

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clientgo-baseline controller|memory [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "controller":
		err = runController(os.Args[2:])
	case "memory":
		err = runMemory(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func stopContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; cancel() }()
	return ctx
}

func runController(args []string) error {
	flags := flag.NewFlagSet("controller", flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster")
	crd := flags.String("crd", "", "the custom resource to watch, GROUP/VERSION/RESOURCE")
	workers := flags.Int("workers", 2, "reconcile workers")
	if err := flags.Parse(args); err != nil {
		return err
	}
	parts := strings.Split(*crd, "/")
	if len(parts) != 3 {
		return fmt.Errorf("--crd must be GROUP/VERSION/RESOURCE, got %q", *crd)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	clients, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	dynamicClient, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx := stopContext()

	queue := workqueue.NewNamedRateLimitingQueue(workqueue.DefaultControllerRateLimiter(), "baseline")
	enqueue := func(prefix string) cache.ResourceEventHandlerFuncs {
		add := func(obj interface{}) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				queue.Add(prefix + "/" + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    add,
			UpdateFunc: func(_, obj interface{}) { add(obj) },
			DeleteFunc: add,
		}
	}

	factory := informers.NewSharedInformerFactory(clients, 10*time.Hour)
	configMaps := factory.Core().V1().ConfigMaps()
	secrets := factory.Core().V1().Secrets()
	deployments := factory.Apps().V1().Deployments()
	configMaps.Informer().AddEventHandler(enqueue("configmap"))
	secrets.Informer().AddEventHandler(enqueue("secret"))
	deployments.Informer().AddEventHandler(enqueue("deployment"))
	dynamicFactory := dynamicinformer.NewDynamicSharedInformerFactory(dynamicClient, 10*time.Hour)
	custom := dynamicFactory.ForResource(schema.GroupVersionResource{
		Group: parts[0], Version: parts[1], Resource: parts[2]})
	custom.Informer().AddEventHandler(enqueue("custom"))

	factory.Start(ctx.Done())
	dynamicFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), configMaps.Informer().HasSynced,
		secrets.Informer().HasSynced, deployments.Informer().HasSynced,
		custom.Informer().HasSynced) {
		return fmt.Errorf("caches did not sync")
	}
	fmt.Printf("synced %.3f\n", time.Since(started).Seconds())

	// The reconcile: look the object up in its lister, as a controller does, and change nothing.
	var reconciles int64
	reconcile := func(key string) {
		kind := key[:strings.IndexByte(key, '/')]
		namespace, name, _ := cache.SplitMetaNamespaceKey(key[len(kind)+1:])
		switch kind {
		case "configmap":
			_, _ = configMaps.Lister().ConfigMaps(namespace).Get(name)
		case "secret":
			_, _ = secrets.Lister().Secrets(namespace).Get(name)
		case "deployment":
			_, _ = deployments.Lister().Deployments(namespace).Get(name)
		default:
			_, _ = custom.Lister().ByNamespace(namespace).Get(name)
		}
		atomic.AddInt64(&reconciles, 1)
	}
	for i := 0; i < *workers; i++ {
		go func() {
			for {
				item, shutdown := queue.Get()
				if shutdown {
					return
				}
				reconcile(item.(string))
				queue.Forget(item)
				queue.Done(item)
			}
		}()
	}
	// Report when the queue has drained, so that the benchmark knows the initial work is done.
	wasBusy := true
	for {
		select {
		case <-ctx.Done():
			queue.ShutDown()
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		busy := queue.Len() > 0
		if wasBusy && !busy {
			fmt.Printf("idle %d\n", atomic.LoadInt64(&reconciles))
		}
		wasBusy = busy
	}
}

// runMemory syncs one informer and reports the Go heap it holds. Its watch never delivers an
// event: the figure is the synced list's.
func runMemory(args []string) error {
	flags := flag.NewFlagSet("memory", flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster")
	kind := flags.String("kind", "configmaps", "configmaps or podlikes")
	namespace := flags.String("namespace", "", "namespace to list")
	podlikePath := flags.String("podlike-path", "/apis/bench.ctrlhost.dev/v1/namespaces/NS/podlikes",
		"API path of the PodLike list (NS: --namespace)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	config.QPS = 1000
	config.Burst = 1000
	clients, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx := stopContext()
	heapInUse := func() uint64 {
		runtime.GC()
		debug.FreeOSMemory()
		var stats runtime.MemStats
		runtime.ReadMemStats(&stats)
		return stats.HeapAlloc
	}

	var informer cache.SharedIndexInformer
	switch *kind {
	case "configmaps":
		factory := informers.NewSharedInformerFactoryWithOptions(clients, 0,
			informers.WithNamespace(*namespace))
		informer = factory.Core().V1().ConfigMaps().Informer()
	case "podlikes":
		// The embedded API server serves no Pods: its PodLikes are Pod-shaped custom resources,
		// decoded here into typed Pods as a Pod informer would hold them.
		path := strings.Replace(*podlikePath, "NS", *namespace, 1)
		rest := clients.CoreV1().RESTClient()
		informer = cache.NewSharedIndexInformer(&cache.ListWatch{
			ListFunc: func(options metav1.ListOptions) (runtimeobj.Object, error) {
				request := rest.Get().AbsPath(path)
				if options.Limit > 0 {
					request = request.Param("limit", fmt.Sprint(options.Limit))
				}
				if options.Continue != "" {
					request = request.Param("continue", options.Continue)
				}
				body, err := request.DoRaw(context.Background())
				if err != nil {
					return nil, err
				}
				var list corev1.PodList
				if err := json.Unmarshal(body, &list); err != nil {
					return nil, err
				}
				return &list, nil
			},
			WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
		}, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	default:
		return fmt.Errorf("--kind must be configmaps or podlikes, got %q", *kind)
	}
	before := heapInUse()
	go informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("cache did not sync")
	}
	after := heapInUse()
	fmt.Printf("objects %d\n", len(informer.GetStore().ListKeys()))
	fmt.Printf("heap_bytes %d\n", int64(after)-int64(before))
	runtime.KeepAlive(informer)
	return nil
}
