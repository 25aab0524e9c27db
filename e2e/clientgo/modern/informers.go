package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func ensureNamespace(ctx context.Context, e *env) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.namespace}}
	_, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", e.namespace, err)
	}
	return nil
}

// events records what a handler saw, by key. Thread-safe: mu guards seen.
type events struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (r *events) add(kind string, obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string][]string{}
	}
	r.seen[key] = append(r.seen[key], kind)
}

func (r *events) has(key, kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.seen[key] {
		if k == kind {
			return true
		}
	}
	return false
}

func handlers(r *events) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { r.add("add", obj) },
		UpdateFunc: func(_, obj interface{}) { r.add("update", obj) },
		DeleteFunc: func(obj interface{}) { r.add("delete", obj) },
	}
}

func waitFor(ctx context.Context, e *env, what string, cond func() bool) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, e.timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		return fmt.Errorf("timed out after %v waiting for %s", e.timeout, what)
	}
	return nil
}

// changeConfigMap creates, updates and deletes a ConfigMap named `name`, waiting after each step
// until `seen` reports it.
func changeConfigMap(ctx context.Context, e *env, name string, seen func(key, kind string) bool) error {
	key := e.namespace + "/" + name
	cms := e.client.CoreV1().ConfigMaps(e.namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}
	created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := waitFor(ctx, e, "the add event of "+key, func() bool { return seen(key, "add") }); err != nil {
		return err
	}
	created.Data["v"] = "2"
	if _, err := cms.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if err := waitFor(ctx, e, "the update event of "+key, func() bool { return seen(key, "update") }); err != nil {
		return err
	}
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return waitFor(ctx, e, "the delete event of "+key, func() bool { return seen(key, "delete") })
}

// A typed shared informer feeding a rate-limited workqueue, as every controller has: an object
// that existed before the informer started arrives with the initial list (a streamed one with
// WatchListClient on, which needs the server's initial-events-end bookmark to ever sync);
// create, update and delete arrive as events; a periodic resync delivers updates again.
func informerScenario(ctx context.Context, e *env) (string, error) {
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "informer-before"}}
	if _, err := e.client.CoreV1().ConfigMaps(e.namespace).Create(ctx, before, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 2*time.Second, informers.WithNamespace(e.namespace))
	informer := factory.Core().V1().ConfigMaps().Informer()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	var recorded events
	enqueue := func(kind string) func(obj interface{}) {
		return func(obj interface{}) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				queue.Add(key)
			}
			recorded.add(kind, obj)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue("add"),
		UpdateFunc: func(_, obj interface{}) { enqueue("update")(obj) },
		DeleteFunc: enqueue("delete"),
	}); err != nil {
		return "", err
	}
	processed := map[string]int{}
	var mu sync.Mutex
	go func() {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			mu.Lock()
			processed[key]++
			mu.Unlock()
			queue.Forget(key)
			queue.Done(key)
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	syncCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return "", fmt.Errorf("the informer never synced (WatchListClient %v): a streamed list needs the bookmark with the k8s.io/initial-events-end annotation", features.FeatureGates().Enabled(features.WatchListClient))
	}
	beforeKey := e.namespace + "/informer-before"
	if !recorded.has(beforeKey, "add") {
		return "", fmt.Errorf("%s, which existed before the start, was not in the initial list", beforeKey)
	}
	if err := changeConfigMap(ctx, e, "informer-changed", recorded.has); err != nil {
		return "", err
	}
	// The resync period (2 s) delivers an update for the object that did not change.
	updates := func() bool { return recorded.has(beforeKey, "update") }
	if err := waitFor(ctx, e, "a resync of "+beforeKey, updates); err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	if processed[beforeKey] == 0 {
		return "", fmt.Errorf("the workqueue never handed out %s", beforeKey)
	}
	return fmt.Sprintf("synced, add/update/delete and a resync seen, workqueue processed %d keys (WatchListClient %v)",
		len(processed), features.FeatureGates().Enabled(features.WatchListClient)), nil
}

// syncAndChange records `informer`'s events, starts it with `start`, waits for it to sync, then
// creates, updates and deletes the ConfigMap "<what>-changed", waiting for each event.
func syncAndChange(ctx context.Context, e *env, informer cache.SharedIndexInformer, start func(), what string) error {
	var recorded events
	if _, err := informer.AddEventHandler(handlers(&recorded)); err != nil {
		return err
	}
	start()
	syncCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return fmt.Errorf("the %s informer never synced", what)
	}
	return changeConfigMap(ctx, e, what+"-changed", recorded.has)
}

// A dynamic (unstructured) informer, as generic controllers and kubectl-like tools use.
func dynamicScenario(ctx context.Context, e *env) (string, error) {
	client, err := dynamic.NewForConfig(e.config)
	if err != nil {
		return "", err
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, e.namespace, nil)
	stop := make(chan struct{})
	defer close(stop)
	informer := factory.ForResource(configmaps).Informer()
	if err := syncAndChange(ctx, e, informer, func() { factory.Start(stop) }, "dynamic"); err != nil {
		return "", err
	}
	return "synced; add, update and delete seen as unstructured objects", nil
}

// A metadata-only informer (PartialObjectMetadata): client-go's metadata client asks for
// application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList first, then JSON.
func metadataScenario(ctx context.Context, e *env) (string, error) {
	client, err := metadata.NewForConfig(e.config)
	if err != nil {
		return "", err
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, e.namespace, nil)
	stop := make(chan struct{})
	defer close(stop)
	informer := factory.ForResource(configmaps).Informer()
	if err := syncAndChange(ctx, e, informer, func() { factory.Start(stop) }, "metadata"); err != nil {
		return "", err
	}
	for _, obj := range informer.GetStore().List() {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return "", fmt.Errorf("the store holds a %T, not PartialObjectMetadata", obj)
		}
		if m.Name == "" || m.ResourceVersion == "" {
			return "", fmt.Errorf("an object without name or resourceVersion: %+v", m.ObjectMeta)
		}
	}
	list, err := client.Resource(configmaps).Namespace(e.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("metadata list: %w", err)
	}
	// The informer relists after a watch it cannot decode, so its events alone do not prove the
	// watch works: a watch of its own must decode a PartialObjectMetadata event.
	w, err := client.Resource(configmaps).Namespace(e.namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return "", fmt.Errorf("metadata watch: %w", err)
	}
	defer w.Stop()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "metadata-watched"}}
	if _, err := e.client.CoreV1().ConfigMaps(e.namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return "", fmt.Errorf("the metadata watch ended without an event")
		}
		m, isMeta := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Added || !isMeta || m.Name != "metadata-watched" {
			return "", fmt.Errorf("the metadata watch sent %s %T (%+v), want ADDED PartialObjectMetadata", ev.Type, ev.Object, ev.Object)
		}
	case <-time.After(e.timeout):
		return "", fmt.Errorf("no event on the metadata watch after %v", e.timeout)
	}
	return fmt.Sprintf("synced; events seen; a list of %d PartialObjectMetadata; a watch event decoded", len(list.Items)), nil
}

// client-go's WatchList request itself (what the typed client's List and the reflector do with
// WatchListClient on): the initial events must end with a bookmark that carries
// k8s.io/initial-events-end and the list blueprint, or client-go falls back to a plain LIST.
// Skipped (passes, saying so) with the feature off.
func watchListScenario(ctx context.Context, e *env) (string, error) {
	if !features.FeatureGates().Enabled(features.WatchListClient) {
		return "skipped: WatchListClient is off", nil
	}
	for i := 0; i < 3; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("watchlist-%d", i)}}
		if _, err := e.client.CoreV1().ConfigMaps(e.namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create: %w", err)
		}
	}
	send := true
	opts := metav1.ListOptions{SendInitialEvents: &send, AllowWatchBookmarks: true, Watch: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	result := e.client.CoreV1().RESTClient().Get().Namespace(e.namespace).Resource("configmaps").
		VersionedParams(&opts, scheme.ParameterCodec).Timeout(e.timeout).WatchList(ctx)
	list := &corev1.ConfigMapList{}
	if err := result.Into(list); err != nil {
		return "", fmt.Errorf("WatchList: %w", err)
	}
	if len(list.Items) < 3 || list.ResourceVersion == "" {
		return "", fmt.Errorf("WatchList gave %d items at resourceVersion %q", len(list.Items), list.ResourceVersion)
	}
	return fmt.Sprintf("a streamed list of %d ConfigMaps at resourceVersion %s", len(list.Items), list.ResourceVersion), nil
}

// An informer whose watch starts from a resourceVersion the server compacted meanwhile (as after
// a long disconnection): the server answers 410 Gone (Expired), and the reflector must relist and
// go on. The program's first list is made to report the stale resourceVersion, so the informer's
// first watch is the one a restarted informer would make. Needs a server that compacts fast (the
// test starts the embedded one with --compaction-retain-revisions=5). With WatchListClient on,
// the reflector does not list first: skipped, saying so.
func relistScenario(ctx context.Context, e *env) (string, error) {
	if features.FeatureGates().Enabled(features.WatchListClient) {
		return "skipped: with WatchListClient the reflector does not list first", nil
	}
	cms := e.client.CoreV1().ConfigMaps(e.namespace)
	old, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list: %w", err)
	}
	stale := old.ResourceVersion
	for i := 0; i < 20; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("relist-%d", i)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("create: %w", err)
		}
	}
	gone := func() bool {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: stale})
		if err != nil {
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			status, ok := ev.Object.(*metav1.Status)
			return ev.Type == watch.Error && ok && status.Code == 410
		case <-time.After(time.Second):
			return false
		}
	}
	if err := waitFor(ctx, e, "the server to refuse a watch from "+stale+" with 410", gone); err != nil {
		return "", err
	}
	var lists atomic.Int32
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			list, err := cms.List(ctx, opts)
			if err == nil && lists.Add(1) == 1 {
				list.ResourceVersion = stale
			}
			return list, err
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) { return cms.Watch(ctx, opts) },
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	var recorded events
	if _, err := informer.AddEventHandler(handlers(&recorded)); err != nil {
		return "", err
	}
	stop := make(chan struct{})
	defer close(stop)
	go informer.Run(stop)
	if err := waitFor(ctx, e, "a relist after the 410", func() bool { return lists.Load() >= 2 }); err != nil {
		return "", err
	}
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "relist-after"}}
	if _, err := cms.Create(ctx, after, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	key := e.namespace + "/relist-after"
	if err := waitFor(ctx, e, "the add event of "+key, func() bool { return recorded.has(key, "add") }); err != nil {
		return "", err
	}
	return fmt.Sprintf("a watch from compacted resourceVersion %s got 410; the informer relisted (%d lists) and sees new objects", stale, lists.Load()), nil
}
