// Every supported kind built with the generated classes, wrapped the way client-go wraps it,
// decoded, and compared with the JSON a JSON client sends for the same object. Each test sets
// the special types (Time, MicroTime, IntOrString, Quantity, FieldsV1, bytes, maps, inline
// fields) and zero values of both Go value fields (left out) and Go pointer fields (kept).
#include <string>

#include "gtest/gtest.h"
#include "runtime/apiserver/kubeproto/apps_v1.pb.h"
#include "runtime/apiserver/kubeproto/coordination_v1.pb.h"
#include "runtime/apiserver/kubeproto/core_v1.pb.h"
#include "runtime/apiserver/kubeproto/core_v1_pod.pb.h"
#include "runtime/apiserver/kubeproto/core_v1_volume.pb.h"
#include "runtime/apiserver/kubeproto/events_v1.pb.h"
#include "runtime/apiserver/kubeproto/kubeproto.h"
#include "runtime/apiserver/kubeproto/meta_v1.pb.h"
#include "runtime/apiserver/kubeproto/runtime.pb.h"

namespace ctrlhost::apiserver {
namespace {

namespace kp = ::ctrlhost::kubeproto;
using Json = nlohmann::json;

// 2024-01-02T03:04:05Z.
constexpr int64_t kSeconds = 1704164645;

std::string Wrap(const std::string& api_version, const std::string& kind,
                 const google::protobuf::Message& message) {
  kp::runtime::Unknown envelope;
  envelope.mutable_typemeta()->set_apiversion(api_version);
  envelope.mutable_typemeta()->set_kind(kind);
  envelope.set_raw(message.SerializeAsString());
  return std::string("k8s\0", 4) + envelope.SerializeAsString();
}

Json Decode(const std::string& body) {
  absl::StatusOr<Json> j = DecodeKubeProtobuf(body);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : Json();
}

void SetTime(kp::meta::v1::Time* t, int64_t seconds, int32_t nanos = 0) {
  t->set_seconds(seconds);
  t->set_nanos(nanos);
}

TEST(KubeProtoRoundTripTest, ObjectMetaEveryField) {
  kp::core::v1::ConfigMap cm;
  kp::meta::v1::ObjectMeta* m = cm.mutable_metadata();
  m->set_name("cm");
  m->set_generatename("cm-");
  m->set_namespace_("ns");
  m->set_selflink("/api/v1/namespaces/ns/configmaps/cm");
  m->set_uid("u-1");
  m->set_resourceversion("42");
  m->set_generation(3);
  SetTime(m->mutable_creationtimestamp(), kSeconds, 999);  // Time drops the nanoseconds.
  SetTime(m->mutable_deletiontimestamp(), kSeconds + 60);
  m->set_deletiongraceperiodseconds(0);  // pointer: an explicit 0 is kept
  (*m->mutable_labels())["app"] = "web";
  (*m->mutable_annotations())["note"] = "ünïcode ✓";
  kp::meta::v1::OwnerReference* o = m->add_ownerreferences();
  o->set_apiversion("apps/v1");
  o->set_kind("Deployment");
  o->set_name("web");
  o->set_uid("u-0");
  o->set_controller(true);
  o->set_blockownerdeletion(false);  // pointer: kept
  m->add_finalizers("a/b");
  m->add_finalizers("c/d");
  kp::meta::v1::ManagedFieldsEntry* e = m->add_managedfields();
  e->set_manager("kubectl");
  e->set_operation("Apply");
  e->set_apiversion("v1");
  SetTime(e->mutable_time(), kSeconds);
  e->set_fieldstype("FieldsV1");
  e->mutable_fieldsv1()->set_raw(R"({"f:data":{"f:k":{}}})");
  e->set_subresource("");  // Go value field: zero means unset
  (*cm.mutable_data())["k"] = "v";
  (*cm.mutable_binarydata())["bin"] = std::string("\x00\xff\x10", 3);
  cm.set_immutable(false);

  EXPECT_EQ(Decode(Wrap("v1", "ConfigMap", cm)), Json::parse(R"json({
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {
      "name": "cm", "generateName": "cm-", "namespace": "ns",
      "selfLink": "/api/v1/namespaces/ns/configmaps/cm", "uid": "u-1",
      "resourceVersion": "42", "generation": 3,
      "creationTimestamp": "2024-01-02T03:04:05Z",
      "deletionTimestamp": "2024-01-02T03:05:05Z",
      "deletionGracePeriodSeconds": 0,
      "labels": {"app": "web"}, "annotations": {"note": "ünïcode ✓"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                           "uid": "u-0", "controller": true, "blockOwnerDeletion": false}],
      "finalizers": ["a/b", "c/d"],
      "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                         "time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:data": {"f:k": {}}}}]
    },
    "data": {"k": "v"}, "binaryData": {"bin": "AP8Q"}, "immutable": false
  })json"));
}

TEST(KubeProtoRoundTripTest, ZeroValueFieldsAndZeroTimesAreLeftOut) {
  kp::core::v1::Namespace ns;
  ns.mutable_metadata()->set_name("n");
  ns.mutable_metadata()->set_namespace_("");
  ns.mutable_metadata()->set_generation(0);
  ns.mutable_metadata()->mutable_creationtimestamp();  // empty message: Go's zero time
  SetTime(ns.mutable_metadata()->mutable_deletiontimestamp(), 0, 0);
  ns.mutable_spec()->add_finalizers("kubernetes");
  ns.mutable_status()->set_phase("Active");
  EXPECT_EQ(Decode(Wrap("v1", "Namespace", ns)), Json::parse(R"json({
    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"},
    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
  })json"));
}

TEST(KubeProtoRoundTripTest, Secret) {
  kp::core::v1::Secret s;
  s.mutable_metadata()->set_name("s");
  (*s.mutable_data())["pw"] = "p@ss";
  (*s.mutable_stringdata())["user"] = "admin";
  s.set_type("Opaque");
  s.set_immutable(true);
  EXPECT_EQ(Decode(Wrap("v1", "Secret", s)), Json::parse(R"json({
    "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
    "data": {"pw": "cEBzcw=="}, "stringData": {"user": "admin"}, "type": "Opaque",
    "immutable": true
  })json"));
}

TEST(KubeProtoRoundTripTest, ServiceAccount) {
  kp::core::v1::ServiceAccount sa;
  sa.mutable_metadata()->set_name("sa");
  sa.add_secrets()->set_name("tok");
  sa.add_imagepullsecrets()->set_name("reg");
  sa.set_automountserviceaccounttoken(false);
  EXPECT_EQ(Decode(Wrap("v1", "ServiceAccount", sa)), Json::parse(R"json({
    "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
    "secrets": [{"name": "tok"}], "imagePullSecrets": [{"name": "reg"}],
    "automountServiceAccountToken": false
  })json"));
}

TEST(KubeProtoRoundTripTest, ServiceSpecAndStatus) {
  kp::core::v1::Service svc;
  svc.mutable_metadata()->set_name("svc");
  kp::core::v1::ServiceSpec* spec = svc.mutable_spec();
  kp::core::v1::ServicePort* p = spec->add_ports();
  p->set_name("http");
  p->set_protocol("TCP");
  p->set_port(80);
  p->mutable_targetport()->set_type(1);
  p->mutable_targetport()->set_strval("http-web");
  p->set_nodeport(0);
  kp::core::v1::ServicePort* p2 = spec->add_ports();
  p2->set_port(9090);
  p2->set_appprotocol("");  // pointer: kept even empty
  p2->mutable_targetport()->set_type(0);
  p2->mutable_targetport()->set_intval(0);  // IntOrString is a message: 0 stays
  (*spec->mutable_selector())["app"] = "web";
  spec->set_clusterip("10.0.0.1");
  spec->add_clusterips("10.0.0.1");
  spec->set_type("LoadBalancer");
  spec->add_externalips("1.2.3.4");
  spec->set_sessionaffinity("ClientIP");
  spec->mutable_sessionaffinityconfig()->mutable_clientip()->set_timeoutseconds(600);
  spec->set_externaltrafficpolicy("Local");
  spec->set_healthchecknodeport(30000);
  spec->add_ipfamilies("IPv4");
  spec->set_ipfamilypolicy("SingleStack");
  spec->set_allocateloadbalancernodeports(false);
  spec->set_internaltrafficpolicy("Cluster");
  kp::core::v1::LoadBalancerIngress* in =
      svc.mutable_status()->mutable_loadbalancer()->add_ingress();
  in->set_ip("5.6.7.8");
  in->add_ports()->set_port(80);
  kp::meta::v1::Condition* c = svc.mutable_status()->add_conditions();
  c->set_type("Ready");
  c->set_status("True");
  c->set_observedgeneration(2);
  SetTime(c->mutable_lasttransitiontime(), kSeconds);
  c->set_reason("Up");
  c->set_message("");
  EXPECT_EQ(Decode(Wrap("v1", "Service", svc)), Json::parse(R"json({
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
    "spec": {
      "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http-web"},
                {"port": 9090, "appProtocol": "", "targetPort": 0}],
      "selector": {"app": "web"}, "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"],
      "type": "LoadBalancer", "externalIPs": ["1.2.3.4"], "sessionAffinity": "ClientIP",
      "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
      "externalTrafficPolicy": "Local", "healthCheckNodePort": 30000, "ipFamilies": ["IPv4"],
      "ipFamilyPolicy": "SingleStack", "allocateLoadBalancerNodePorts": false,
      "internalTrafficPolicy": "Cluster"
    },
    "status": {
      "loadBalancer": {"ingress": [{"ip": "5.6.7.8", "ports": [{"port": 80}]}]},
      "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2,
                      "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "Up"}]
    }
  })json"));
}

TEST(KubeProtoRoundTripTest, CoreEvent) {
  kp::core::v1::Event ev;
  ev.mutable_metadata()->set_name("web.1");
  ev.mutable_metadata()->set_namespace_("default");
  kp::core::v1::ObjectReference* ref = ev.mutable_involvedobject();
  ref->set_kind("Deployment");
  ref->set_namespace_("default");
  ref->set_name("web");
  ref->set_uid("u");
  ref->set_apiversion("apps/v1");
  ref->set_resourceversion("7");
  ref->set_fieldpath("spec");
  ev.set_reason("Scaled");
  ev.set_message("scaled to 2");
  ev.mutable_source()->set_component("ctrl");
  ev.mutable_source()->set_host("h");
  SetTime(ev.mutable_firsttimestamp(), kSeconds);
  SetTime(ev.mutable_lasttimestamp(), kSeconds + 1);
  ev.set_count(2);
  ev.set_type("Normal");
  ev.mutable_eventtime()->set_seconds(kSeconds);
  ev.mutable_eventtime()->set_nanos(123456789);  // MicroTime keeps microseconds
  ev.mutable_series()->set_count(5);
  ev.mutable_series()->mutable_lastobservedtime()->set_seconds(kSeconds);
  ev.set_action("Scale");
  ev.mutable_related()->set_kind("ReplicaSet");
  ev.set_reportingcomponent("ctrl");
  ev.set_reportinginstance("ctrl-0");
  EXPECT_EQ(Decode(Wrap("v1", "Event", ev)), Json::parse(R"json({
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"name": "web.1", "namespace": "default"},
    "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "web", "uid": "u",
                       "apiVersion": "apps/v1", "resourceVersion": "7", "fieldPath": "spec"},
    "reason": "Scaled", "message": "scaled to 2", "source": {"component": "ctrl", "host": "h"},
    "firstTimestamp": "2024-01-02T03:04:05Z", "lastTimestamp": "2024-01-02T03:04:06Z",
    "count": 2, "type": "Normal", "eventTime": "2024-01-02T03:04:05.123456Z",
    "series": {"count": 5, "lastObservedTime": "2024-01-02T03:04:05.000000Z"},
    "action": "Scale", "related": {"kind": "ReplicaSet"},
    "reportingComponent": "ctrl", "reportingInstance": "ctrl-0"
  })json"));
}

TEST(KubeProtoRoundTripTest, EventsV1Event) {
  kp::events::v1::Event ev;
  ev.mutable_metadata()->set_name("e");
  ev.mutable_eventtime()->set_seconds(kSeconds);
  ev.mutable_series()->set_count(1);
  ev.mutable_series()->mutable_lastobservedtime()->set_seconds(kSeconds + 2);
  ev.set_reportingcontroller("ctrlhost.dev/x");
  ev.set_reportinginstance("x-0");
  ev.set_action("Reconcile");
  ev.set_reason("Done");
  ev.mutable_regarding()->set_kind("Pod");
  ev.mutable_related()->set_name("n");
  ev.set_note("ok");
  ev.set_type("Normal");
  ev.mutable_deprecatedsource()->set_component("c");
  SetTime(ev.mutable_deprecatedfirsttimestamp(), kSeconds);
  ev.set_deprecatedcount(0);
  EXPECT_EQ(Decode(Wrap("events.k8s.io/v1", "Event", ev)), Json::parse(R"json({
    "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
    "eventTime": "2024-01-02T03:04:05.000000Z",
    "series": {"count": 1, "lastObservedTime": "2024-01-02T03:04:07.000000Z"},
    "reportingController": "ctrlhost.dev/x", "reportingInstance": "x-0", "action": "Reconcile",
    "reason": "Done", "regarding": {"kind": "Pod"}, "related": {"name": "n"}, "note": "ok",
    "type": "Normal", "deprecatedSource": {"component": "c"},
    "deprecatedFirstTimestamp": "2024-01-02T03:04:05Z"
  })json"));
}

TEST(KubeProtoRoundTripTest, Lease) {
  kp::coordination::v1::Lease lease;
  lease.mutable_metadata()->set_name("leader");
  kp::coordination::v1::LeaseSpec* spec = lease.mutable_spec();
  spec->set_holderidentity("host-1");
  spec->set_leasedurationseconds(15);
  spec->mutable_acquiretime()->set_seconds(kSeconds);
  spec->mutable_renewtime()->set_seconds(kSeconds + 10);
  spec->mutable_renewtime()->set_nanos(500000000);
  spec->set_leasetransitions(0);  // pointer: kept
  EXPECT_EQ(Decode(Wrap("coordination.k8s.io/v1", "Lease", lease)), Json::parse(R"json({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
    "spec": {"holderIdentity": "host-1", "leaseDurationSeconds": 15,
             "acquireTime": "2024-01-02T03:04:05.000000Z",
             "renewTime": "2024-01-02T03:04:15.500000Z", "leaseTransitions": 0}
  })json"));
}

TEST(KubeProtoRoundTripTest, DeleteOptionsUnderAnyGroupVersion) {
  kp::meta::v1::DeleteOptions opts;
  opts.set_graceperiodseconds(0);
  opts.mutable_preconditions()->set_uid("u");
  opts.mutable_preconditions()->set_resourceversion("9");
  opts.set_propagationpolicy("Foreground");
  opts.add_dryrun("All");
  for (const char* api_version : {"v1", "apps/v1", "meta.k8s.io/v1"}) {
    Json expected = Json::parse(R"json({
      "kind": "DeleteOptions", "gracePeriodSeconds": 0,
      "preconditions": {"uid": "u", "resourceVersion": "9"},
      "propagationPolicy": "Foreground", "dryRun": ["All"]
    })json");
    expected["apiVersion"] = api_version;
    EXPECT_EQ(Decode(Wrap(api_version, "DeleteOptions", opts)), expected);
  }
}

}  // namespace
}  // namespace ctrlhost::apiserver
