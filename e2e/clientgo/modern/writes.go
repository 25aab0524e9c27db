package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The typed client with protobuf, as many controllers configure it for built-in kinds
// (ContentType application/vnd.kubernetes.protobuf): a server that answers JSON instead must say
// so in Content-Type, and client-go then decodes JSON.
func protobufScenario(ctx context.Context, e *env) (string, error) {
	config := rest.CopyConfig(e.config)
	config.ContentType = "application/vnd.kubernetes.protobuf"
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return "", err
	}
	cms := client.CoreV1().ConfigMaps(e.namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "protobuf"}, Data: map[string]string{"k": "v"}}
	created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create with a protobuf body: %w", err)
	}
	got, err := cms.Get(ctx, "protobuf", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	if got.Data["k"] != "v" || got.UID != created.UID {
		return "", fmt.Errorf("read back %+v", got)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list: %w", err)
	}
	if err := cms.Delete(ctx, "protobuf", metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete: %w", err)
	}
	return fmt.Sprintf("create, get, list (%d items) and delete with protobuf asked for", len(list.Items)), nil
}

// Server-side apply with apply configurations: two field managers, a conflict, and force.
func applyScenario(ctx context.Context, e *env) (string, error) {
	cms := e.client.CoreV1().ConfigMaps(e.namespace)
	first := applycorev1.ConfigMap("applied", e.namespace).WithData(map[string]string{"a": "1"})
	applied, err := cms.Apply(ctx, first, metav1.ApplyOptions{FieldManager: "first"})
	if err != nil {
		return "", fmt.Errorf("apply by first: %w", err)
	}
	if applied.Data["a"] != "1" {
		return "", fmt.Errorf("applied data %v", applied.Data)
	}
	second := applycorev1.ConfigMap("applied", e.namespace).WithData(map[string]string{"a": "2"})
	_, err = cms.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "second"})
	if !apierrors.IsConflict(err) {
		return "", fmt.Errorf("a second manager's apply of the first's field: got %v, want a 409 conflict", err)
	}
	forced, err := cms.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "second", Force: true})
	if err != nil {
		return "", fmt.Errorf("forced apply: %w", err)
	}
	if forced.Data["a"] != "2" {
		return "", fmt.Errorf("forced apply left data %v", forced.Data)
	}
	managers := map[string]bool{}
	for _, f := range forced.ManagedFields {
		managers[f.Manager] = true
	}
	if !managers["second"] {
		return "", fmt.Errorf("managedFields after the forced apply: %v", managers)
	}
	// The first manager gives the field up by applying without it.
	if _, err := cms.Apply(ctx, applycorev1.ConfigMap("applied", e.namespace), metav1.ApplyOptions{FieldManager: "first"}); err != nil {
		return "", fmt.Errorf("apply of nothing by first: %w", err)
	}
	if err := cms.Delete(ctx, "applied", metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete: %w", err)
	}
	return "apply, a 409 conflict for another manager, force takes the field over", nil
}

// client-go's leader election on a Lease: two candidates, exactly one leads; when it releases,
// the other takes over and the Lease records the transition.
func leaderElectionScenario(ctx context.Context, e *env) (string, error) {
	name := fmt.Sprintf("clientgo-modern-%d", time.Now().UnixNano())
	var leaders atomic.Int32
	var firstLeader atomic.Value
	start := func(ctx context.Context, identity string, lost chan<- string) {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: e.namespace},
			Client:     e.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		}
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					leaders.Add(1)
					firstLeader.CompareAndSwap(nil, identity)
				},
				OnStoppedLeading: func() { leaders.Add(-1); lost <- identity },
			},
		})
	}
	ctxA, cancelA := context.WithCancel(ctx)
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	lost := make(chan string, 2)
	go start(ctxA, "a", lost)
	if err := waitFor(ctx, e, "a leader", func() bool { return leaders.Load() == 1 }); err != nil {
		cancelA()
		return "", err
	}
	go start(ctxB, "b", lost)
	time.Sleep(1500 * time.Millisecond) // b tries a few times; a renews
	if n := leaders.Load(); n != 1 || firstLeader.Load() != "a" {
		cancelA()
		return "", fmt.Errorf("%d leaders (first %v) while a holds the Lease", n, firstLeader.Load())
	}
	cancelA() // a releases the Lease on cancel
	if err := waitFor(ctx, e, "b to take over", func() bool { return len(lost) == 1 && leaders.Load() == 1 }); err != nil {
		return "", err
	}
	lease, err := e.client.CoordinationV1().Leases(e.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if err := checkLease(lease, "b"); err != nil {
		return "", err
	}
	return fmt.Sprintf("one leader of two, a hand-over on release; Lease holder b, %d transitions", *lease.Spec.LeaseTransitions), nil
}

func checkLease(lease *coordinationv1.Lease, holder string) error {
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity != holder {
		return fmt.Errorf("lease holder %v, want %s", s.HolderIdentity, holder)
	}
	if s.LeaseTransitions == nil || *s.LeaseTransitions < 1 {
		return fmt.Errorf("leaseTransitions %v after a hand-over", s.LeaseTransitions)
	}
	if s.RenewTime == nil || s.AcquireTime == nil || s.LeaseDurationSeconds == nil {
		return fmt.Errorf("lease without renewTime, acquireTime or leaseDurationSeconds: %+v", s)
	}
	return nil
}

// Pagination with limit/continue, label and field selectors, and a dry-run create.
func listScenario(ctx context.Context, e *env) (string, error) {
	cms := e.client.CoreV1().ConfigMaps(e.namespace)
	for i := 0; i < 7; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("page-%d", i), Labels: map[string]string{"page": "yes", "odd": fmt.Sprint(i%2 == 1)}}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create: %w", err)
		}
	}
	seen := 0
	pages := 0
	opts := metav1.ListOptions{LabelSelector: "page=yes", Limit: 3}
	for {
		list, err := cms.List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("page %d: %w", pages, err)
		}
		pages++
		seen += len(list.Items)
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
		if pages > 10 {
			return "", fmt.Errorf("more than 10 pages of 3 for 7 objects")
		}
	}
	if seen != 7 || pages != 3 {
		return "", fmt.Errorf("%d objects in %d pages, want 7 in 3", seen, pages)
	}
	odd, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "page=yes,odd=true"})
	if err != nil || len(odd.Items) != 3 {
		return "", fmt.Errorf("label selector odd=true: %v items, err %v", len(odd.Items), err)
	}
	named, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=page-4"})
	if err != nil || len(named.Items) != 1 {
		return "", fmt.Errorf("field selector metadata.name=page-4: %v items, err %v", len(named.Items), err)
	}
	if err := resourceVersionMatch(ctx, e); err != nil {
		return "", err
	}
	dry := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry-run"}}
	if _, err := cms.Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		return "", fmt.Errorf("dry-run create: %w", err)
	}
	if _, err := cms.Get(ctx, "dry-run", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("a dry-run create was stored (get: %v)", err)
	}
	return "7 objects in 3 pages of 3, label and field selectors, resourceVersionMatch Exact and NotOlderThan, dry-run stores nothing", nil
}

// A list at an exact past resourceVersion shows the collection as it was then; NotOlderThan
// shows it at least as new.
func resourceVersionMatch(ctx context.Context, e *env) error {
	cms := e.client.CoreV1().ConfigMaps(e.namespace)
	before, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "page=yes"})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "page-later", Labels: map[string]string{"page": "yes"}}}
	if _, err := cms.Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer cms.Delete(ctx, "page-later", metav1.DeleteOptions{}) //nolint:errcheck
	exact, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "page=yes",
		ResourceVersion: before.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		return fmt.Errorf("list at resourceVersion %s, Exact: %w", before.ResourceVersion, err)
	}
	if len(exact.Items) != len(before.Items) || exact.ResourceVersion != before.ResourceVersion {
		return fmt.Errorf("list Exact at %s: %d items at %s, want %d at %s", before.ResourceVersion,
			len(exact.Items), exact.ResourceVersion, len(before.Items), before.ResourceVersion)
	}
	newer, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "page=yes",
		ResourceVersion: before.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		return fmt.Errorf("list NotOlderThan: %w", err)
	}
	if len(newer.Items) != len(before.Items)+1 {
		return fmt.Errorf("list NotOlderThan %s: %d items, want %d", before.ResourceVersion, len(newer.Items), len(before.Items)+1)
	}
	return nil
}

// The status subresource of a built-in kind: UpdateStatus writes status only, and an update of
// the object leaves status as it is (a Service: nothing in either server writes its status).
func statusScenario(ctx context.Context, e *env) (string, error) {
	svcs := e.client.CoreV1().Services(e.namespace)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "status"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	created, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	defer svcs.Delete(ctx, "status", metav1.DeleteOptions{}) //nolint:errcheck
	created.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	created.Spec.Ports[0].Port = 81 // not written through /status
	updated, err := svcs.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return "", fmt.Errorf("UpdateStatus: %w", err)
	}
	if len(updated.Status.LoadBalancer.Ingress) != 1 || updated.Spec.Ports[0].Port != 80 {
		return "", fmt.Errorf("after UpdateStatus: ingress %v, port %d (want the ingress, port 80)",
			updated.Status.LoadBalancer.Ingress, updated.Spec.Ports[0].Port)
	}
	updated.Status.LoadBalancer.Ingress = nil
	updated.Labels = map[string]string{"touched": "yes"}
	again, err := svcs.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return "", fmt.Errorf("Update: %w", err)
	}
	if len(again.Status.LoadBalancer.Ingress) != 1 || again.Labels["touched"] != "yes" {
		return "", fmt.Errorf("an update of the object changed its status (ingress %v) or not its labels (%v)",
			again.Status.LoadBalancer.Ingress, again.Labels)
	}
	return "UpdateStatus writes status alone; Update leaves status alone", nil
}

// An event through events.k8s.io/v1, as the new event recorder writes them.
func eventsScenario(ctx context.Context, e *env) (string, error) {
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("modern.%d", time.Now().UnixNano()), Namespace: e.namespace},
		EventTime:           now,
		ReportingController: "ctrlhost.dev/clientgo-modern",
		ReportingInstance:   "clientgo-modern-1",
		Action:              "Checking",
		Reason:              "Checked",
		Type:                corev1.EventTypeNormal,
		Note:                "an events.k8s.io/v1 event",
		// Kubernetes requires regarding.namespace to be the event's namespace (or, for a
		// cluster-scoped object, the event in "default" or no namespace).
		Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: e.namespace, Name: "regarded", APIVersion: "v1"},
	}
	created, err := e.client.EventsV1().Events(e.namespace).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	got, err := e.client.EventsV1().Events(e.namespace).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	if got.Reason != "Checked" || got.Note != ev.Note || got.ReportingController != ev.ReportingController {
		return "", fmt.Errorf("read back %+v", got)
	}
	// The same event seen through core/v1, as kubectl describe shows it.
	core, err := e.client.CoreV1().Events(e.namespace).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("core/v1 get of an events.k8s.io/v1 event: %w", err)
	}
	if core.Message != ev.Note {
		return "", fmt.Errorf("core/v1 message %q, want the note %q", core.Message, ev.Note)
	}
	return "created and read through events.k8s.io/v1 and core/v1", nil
}

// leasePeer campaigns, as client-go controllers do, for a Lease another program (`ctrlhost run
// --leader-elect`) also campaigns for, with client-go's default timings (15 s / 10 s / 2 s). It
// prints "LEADER <identity>" whenever it sees a new holder, "STARTED <identity>" once it leads,
// holds the Lease for -hold, releases it and prints "RELEASED <identity>". The two programs must
// agree on the Lease: never two leaders, a release taken over at the next attempt.
func leasePeerScenario(ctx context.Context, e *env) (string, error) {
	if *leaseName == "" {
		return "", fmt.Errorf("-lease-name is required")
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var led atomic.Bool
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: *leaseName, Namespace: e.namespace},
		Client:     e.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
	}
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnNewLeader: func(id string) { fmt.Printf("LEADER %s\n", id) },
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				fmt.Printf("STARTED %s\n", *identity)
				select {
				case <-time.After(*hold):
				case <-ctx.Done():
				}
				cancel()
			},
			OnStoppedLeading: func() { fmt.Printf("RELEASED %s\n", *identity) },
		},
	})
	if !led.Load() {
		return "", fmt.Errorf("never led within %v", e.timeout)
	}
	return fmt.Sprintf("led the Lease %s/%s for %v and released it", e.namespace, *leaseName, *hold), nil
}
