// Package ctrlhost writes ctrlhost controllers in Go: a plugin is a process the host starts with
// CTRLHOST_PLUGIN_ADDRESS set; it declares its controllers and answers each reconcile with what
// it wants (desired children, status, conditions, events, a requeue or an error). The host
// validates and applies the answer: the plugin holds no API credentials and no cache.
//
// A plugin in a few lines:
//
//	greeter := ctrlhost.NewController("greeter").
//		For("example.com", "v1", "Greeting").
//		Owns("", "v1", "ConfigMap").
//		Reconcile(func(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
//			who, _ := ctrlhost.String(req.Object, "spec.name")
//			if who == "" {
//				return nil, ctrlhost.Terminal(errors.New("spec.name is required"))
//			}
//			res := &ctrlhost.Result{}
//			cm := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-greeting"))
//			cm["data"] = map[string]any{"text": "Hello, " + who + "!"}
//			res.SetCondition("Ready", ctrlhost.ConditionTrue, "Greeted", "ConfigMap written")
//			return res, nil
//		})
//	ctrlhost.NewPlugin("greeter", "0.1.0", greeter).Main() // serves until SIGTERM
//
// # Guarantees
//
// Reconcile is level-based: a request carries the current object (and its children and related
// objects, from the host's cache); the answer says what should be true. The host never runs two
// reconciles for one key at once, so a ReconcileFunc runs concurrently only for different
// objects. The answer is validated here the same way as by the C++, Python and Node SDKs and
// by the host (Result). An error returned by a ReconcileFunc is retried with backoff, unless it
// is wrapped by Terminal (no retry until the object changes). A panic in a ReconcileFunc is
// recovered and answered as a retryable error naming it; the plugin keeps serving every other
// key. The ctx of a ReconcileFunc is cancelled when the host sends a CancelNotice, when the
// request's deadline passes, and when a drain gives up; the answer is then discarded.
//
// Serving (Plugin.Serve) follows docs/protocol.md: Describe negotiates protocol v1alpha1 and
// capabilities, grpc.health.v1 answers SERVING for "" and the plugin service (NOT_SERVING while
// draining), messages up to 64 MiB are accepted and sent, answers go out in completion order
// with Send serialized, an answer over the limit is not sent and that request alone gets the
// terminal error ResponseTooLarge instead (not retried until the object changes: the same state
// would give the same answer), and SIGTERM drains (new work refused with the retryable error "plugin shutting down",
// in-flight work given Plugin.DrainTimeout).
//
// Package ctrlhosttest runs a controller in process on fixture objects, through the same path.
package ctrlhost

//go:generate sh -c "protoc -I ../../proto --go_out=. --go_opt=module=ctrlhost.dev/sdk/go --go-grpc_out=. --go-grpc_opt=module=ctrlhost.dev/sdk/go ../../proto/ctrlhost/plugin/v1alpha1/plugin.proto ../../proto/ctrlhost/admin/v1alpha1/admin.proto"
