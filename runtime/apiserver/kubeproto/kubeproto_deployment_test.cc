// A Deployment with the pod template fields operators and Helm charts set, built with the
// generated classes and decoded: containers, probes (inline handler), env sources (inline
// LocalObjectReference), resources (Quantity maps), volumes of the common kinds (inline
// VolumeSource), security contexts with explicit false/0, scheduling, strategy and status.
#include <string>

#include "gtest/gtest.h"
#include "runtime/apiserver/kubeproto/apps_v1.pb.h"
#include "runtime/apiserver/kubeproto/core_v1_pod.pb.h"
#include "runtime/apiserver/kubeproto/core_v1_volume.pb.h"
#include "runtime/apiserver/kubeproto/kubeproto.h"
#include "runtime/apiserver/kubeproto/runtime.pb.h"

namespace ctrlhost::apiserver {
namespace {

namespace kp = ::ctrlhost::kubeproto;
namespace core = ::ctrlhost::kubeproto::core::v1;
using Json = nlohmann::json;

std::string Wrap(const google::protobuf::Message& message) {
  kp::runtime::Unknown envelope;
  envelope.mutable_typemeta()->set_apiversion("apps/v1");
  envelope.mutable_typemeta()->set_kind("Deployment");
  envelope.set_raw(message.SerializeAsString());
  return std::string("k8s\0", 4) + envelope.SerializeAsString();
}

void SetQuantity(google::protobuf::Map<std::string, kp::resource::Quantity>* m,
                 const std::string& name, const std::string& value) {
  (*m)[name].set_string(value);
}

core::Container* AddContainer(core::PodSpec* spec) {
  core::Container* c = spec->add_containers();
  c->set_name("app");
  c->set_image("registry.example.com/app:1.2");
  c->add_command("/app");
  c->add_args("--port=8080");
  c->set_workingdir("/srv");
  core::ContainerPort* port = c->add_ports();
  port->set_name("http");
  port->set_containerport(8080);
  port->set_protocol("TCP");
  port->set_hostport(0);  // value field: left out
  core::EnvVar* plain = c->add_env();
  plain->set_name("MODE");
  plain->set_value("prod");
  core::EnvVar* from_field = c->add_env();
  from_field->set_name("POD_NAME");
  from_field->mutable_valuefrom()->mutable_fieldref()->set_fieldpath("metadata.name");
  core::EnvVar* from_secret = c->add_env();
  from_secret->set_name("PW");
  core::SecretKeySelector* sk = from_secret->mutable_valuefrom()->mutable_secretkeyref();
  sk->mutable_localobjectreference()->set_name("creds");
  sk->set_key("pw");
  sk->set_optional(false);
  core::EnvVar* from_cm = c->add_env();
  from_cm->set_name("LEVEL");
  from_cm->mutable_valuefrom()->mutable_configmapkeyref()->mutable_localobjectreference()->set_name(
      "cfg");
  from_cm->mutable_valuefrom()->mutable_configmapkeyref()->set_key("level");
  core::EnvVar* from_res = c->add_env();
  from_res->set_name("MEM");
  from_res->mutable_valuefrom()->mutable_resourcefieldref()->set_resource("limits.memory");
  from_res->mutable_valuefrom()->mutable_resourcefieldref()->mutable_divisor()->set_string("1Mi");
  c->add_envfrom()->mutable_configmapref()->mutable_localobjectreference()->set_name("cfg");
  core::EnvFromSource* ef = c->add_envfrom();
  ef->set_prefix("S_");
  ef->mutable_secretref()->mutable_localobjectreference()->set_name("creds");
  SetQuantity(c->mutable_resources()->mutable_limits(), "cpu", "500m");
  SetQuantity(c->mutable_resources()->mutable_limits(), "memory", "256Mi");
  SetQuantity(c->mutable_resources()->mutable_requests(), "cpu", "100m");
  core::VolumeMount* vm = c->add_volumemounts();
  vm->set_name("config");
  vm->set_mountpath("/etc/app");
  vm->set_readonly(true);
  vm->set_subpath("");
  core::Probe* live = c->mutable_livenessprobe();
  live->mutable_handler()->mutable_httpget()->set_path("/healthz");
  live->mutable_handler()->mutable_httpget()->mutable_port()->set_type(1);
  live->mutable_handler()->mutable_httpget()->mutable_port()->set_strval("http");
  live->mutable_handler()->mutable_httpget()->set_scheme("HTTP");
  live->set_initialdelayseconds(5);
  live->set_periodseconds(10);
  live->set_failurethreshold(3);
  core::Probe* ready = c->mutable_readinessprobe();
  ready->mutable_handler()->mutable_tcpsocket()->mutable_port()->set_intval(8080);
  core::Probe* startup = c->mutable_startupprobe();
  startup->mutable_handler()->mutable_exec()->add_command("true");
  startup->set_terminationgraceperiodseconds(0);
  c->mutable_lifecycle()->mutable_prestop()->mutable_sleep()->set_seconds(3);
  c->set_imagepullpolicy("IfNotPresent");
  core::SecurityContext* sc = c->mutable_securitycontext();
  sc->set_allowprivilegeescalation(false);
  sc->set_readonlyrootfilesystem(true);
  sc->set_runasuser(0);
  sc->set_runasnonroot(false);
  sc->mutable_capabilities()->add_drop("ALL");
  sc->mutable_seccompprofile()->set_type("RuntimeDefault");
  c->set_terminationmessagepath("/dev/termination-log");
  c->set_tty(false);  // value field: left out
  return c;
}

void AddVolumes(core::PodSpec* spec) {
  core::Volume* v = spec->add_volumes();
  v->set_name("config");
  core::ConfigMapVolumeSource* cm = v->mutable_volumesource()->mutable_configmap();
  cm->mutable_localobjectreference()->set_name("cfg");
  cm->set_defaultmode(0420);
  core::KeyToPath* item = cm->add_items();
  item->set_key("a");
  item->set_path("a.conf");
  v = spec->add_volumes();
  v->set_name("creds");
  v->mutable_volumesource()->mutable_secret()->set_secretname("creds");
  v->mutable_volumesource()->mutable_secret()->set_optional(true);
  v = spec->add_volumes();
  v->set_name("scratch");
  v->mutable_volumesource()->mutable_emptydir()->set_medium("Memory");
  v->mutable_volumesource()->mutable_emptydir()->mutable_sizelimit()->set_string("64Mi");
  v = spec->add_volumes();
  v->set_name("data");
  v->mutable_volumesource()->mutable_persistentvolumeclaim()->set_claimname("data-0");
  v = spec->add_volumes();
  v->set_name("host");
  v->mutable_volumesource()->mutable_hostpath()->set_path("/var/log");
  v->mutable_volumesource()->mutable_hostpath()->set_type("Directory");
  v = spec->add_volumes();
  v->set_name("podinfo");
  core::DownwardAPIVolumeFile* f = v->mutable_volumesource()->mutable_downwardapi()->add_items();
  f->set_path("labels");
  f->mutable_fieldref()->set_fieldpath("metadata.labels");
  v = spec->add_volumes();
  v->set_name("all");
  core::ProjectedVolumeSource* p = v->mutable_volumesource()->mutable_projected();
  p->add_sources()->mutable_configmap()->mutable_localobjectreference()->set_name("cfg");
  p->add_sources()->mutable_secret()->mutable_localobjectreference()->set_name("creds");
  core::ServiceAccountTokenProjection* tok = p->add_sources()->mutable_serviceaccounttoken();
  tok->set_path("token");
  tok->set_expirationseconds(3600);
  tok->set_audience("api");
}

// Node affinity, pod anti-affinity and a toleration, with the zero values Go sends.
void AddScheduling(core::PodSpec* pod) {
  core::NodeSelectorRequirement* nsr =
      pod->mutable_affinity()
          ->mutable_nodeaffinity()
          ->mutable_requiredduringschedulingignoredduringexecution()
          ->add_nodeselectorterms()
          ->add_matchexpressions();
  nsr->set_key("zone");
  nsr->set_operator_("Exists");
  core::WeightedPodAffinityTerm* w = pod->mutable_affinity()
                                         ->mutable_podantiaffinity()
                                         ->add_preferredduringschedulingignoredduringexecution();
  w->set_weight(100);
  w->mutable_podaffinityterm()->set_topologykey("kubernetes.io/hostname");
  (*w->mutable_podaffinityterm()->mutable_labelselector()->mutable_matchlabels())["app"] = "web";
  core::Toleration* t = pod->add_tolerations();
  t->set_key("dedicated");
  t->set_operator_("Equal");
  t->set_value("web");
  t->set_effect("NoExecute");
  t->set_tolerationseconds(0);
}

// The JSON that PodTemplateFieldsOperatorsSet's Deployment decodes to.
constexpr char kPodTemplateDeploymentJson[] = R"json({
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "prod"},
  "spec": {
    "replicas": 0,
    "selector": {"matchLabels": {"app": "web"},
                 "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]},
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
    "revisionHistoryLimit": 0, "progressDeadlineSeconds": 600,
    "template": {
      "metadata": {"labels": {"app": "web"}, "annotations": {"checksum/config": "abc"}},
      "spec": {
        "volumes": [
          {"name": "config", "configMap": {"name": "cfg", "defaultMode": 272,
                                           "items": [{"key": "a", "path": "a.conf"}]}},
          {"name": "creds", "secret": {"secretName": "creds", "optional": true}},
          {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
          {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
          {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
          {"name": "podinfo", "downwardAPI": {"items": [
              {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
          {"name": "all", "projected": {"sources": [
              {"configMap": {"name": "cfg"}}, {"secret": {"name": "creds"}},
              {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600,
                                       "audience": "api"}}]}}
        ],
        "initContainers": [{"name": "migrate", "image": "app:1.2", "args": ["migrate"]}],
        "containers": [{
          "name": "app", "image": "registry.example.com/app:1.2", "command": ["/app"],
          "args": ["--port=8080"], "workingDir": "/srv",
          "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
          "env": [
            {"name": "MODE", "value": "prod"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw",
                                                          "optional": false}}},
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                               "divisor": "1Mi"}}}
          ],
          "envFrom": [{"configMapRef": {"name": "cfg"}},
                      {"prefix": "S_", "secretRef": {"name": "creds"}}],
          "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m"}},
          "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": true}],
          "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                            "initialDelaySeconds": 5, "periodSeconds": 10, "failureThreshold": 3},
          "readinessProbe": {"tcpSocket": {"port": 8080}},
          "startupProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 0},
          "lifecycle": {"preStop": {"sleep": {"seconds": 3}}},
          "imagePullPolicy": "IfNotPresent",
          "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                              "runAsUser": 0, "runAsNonRoot": false,
                              "capabilities": {"drop": ["ALL"]},
                              "seccompProfile": {"type": "RuntimeDefault"}},
          "terminationMessagePath": "/dev/termination-log"
        }],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": "web", "automountServiceAccountToken": false,
        "securityContext": {"runAsNonRoot": true, "fsGroup": 2000},
        "imagePullSecrets": [{"name": "reg"}],
        "affinity": {
          "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}},
          "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                "labelSelector": {"matchLabels": {"app": "web"}}}}]}
        },
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web",
                         "effect": "NoExecute", "tolerationSeconds": 0}]
      }
    }
  },
  "status": {
    "observedGeneration": 4, "replicas": 2, "readyReplicas": 2,
    "conditions": [{"type": "Available", "status": "True",
                    "lastUpdateTime": "2024-01-02T03:04:05Z",
                    "lastTransitionTime": "2024-01-02T03:04:05Z",
                    "reason": "MinimumReplicasAvailable"}]
  }
  })json";

TEST(KubeProtoDeploymentTest, PodTemplateFieldsOperatorsSet) {
  kp::apps::v1::Deployment d;
  d.mutable_metadata()->set_name("web");
  d.mutable_metadata()->set_namespace_("prod");
  d.mutable_metadata()->mutable_creationtimestamp();  // zero time: Go always sends it
  kp::apps::v1::DeploymentSpec* spec = d.mutable_spec();
  spec->set_replicas(0);  // pointer: an explicit 0 must not become the default 1
  (*spec->mutable_selector()->mutable_matchlabels())["app"] = "web";
  kp::meta::v1::LabelSelectorRequirement* req = spec->mutable_selector()->add_matchexpressions();
  req->set_key("tier");
  req->set_operator_("In");
  req->add_values("front");
  spec->mutable_strategy()->set_type("RollingUpdate");
  spec->mutable_strategy()->mutable_rollingupdate()->mutable_maxsurge()->set_type(1);
  spec->mutable_strategy()->mutable_rollingupdate()->mutable_maxsurge()->set_strval("25%");
  spec->mutable_strategy()->mutable_rollingupdate()->mutable_maxunavailable()->set_intval(0);
  spec->set_minreadyseconds(0);
  spec->set_revisionhistorylimit(0);
  spec->set_progressdeadlineseconds(600);
  core::PodTemplateSpec* tpl = spec->mutable_template_();
  (*tpl->mutable_metadata()->mutable_labels())["app"] = "web";
  (*tpl->mutable_metadata()->mutable_annotations())["checksum/config"] = "abc";
  core::PodSpec* pod = tpl->mutable_spec();
  AddVolumes(pod);
  core::Container* init = pod->add_initcontainers();
  init->set_name("migrate");
  init->set_image("app:1.2");
  init->add_args("migrate");
  AddContainer(pod);
  pod->set_restartpolicy("Always");
  pod->set_terminationgraceperiodseconds(30);
  pod->set_dnspolicy("ClusterFirst");
  (*pod->mutable_nodeselector())["kubernetes.io/os"] = "linux";
  pod->set_serviceaccountname("web");
  pod->set_automountserviceaccounttoken(false);
  pod->mutable_securitycontext()->set_runasnonroot(true);
  pod->mutable_securitycontext()->set_fsgroup(2000);
  pod->add_imagepullsecrets()->set_name("reg");
  AddScheduling(pod);
  kp::apps::v1::DeploymentStatus* st = d.mutable_status();
  st->set_observedgeneration(4);
  st->set_replicas(2);
  st->set_readyreplicas(2);
  kp::apps::v1::DeploymentCondition* c = st->add_conditions();
  c->set_type("Available");
  c->set_status("True");
  c->mutable_lastupdatetime()->set_seconds(1704164645);
  c->mutable_lasttransitiontime()->set_seconds(1704164645);
  c->set_reason("MinimumReplicasAvailable");

  absl::StatusOr<Json> got = DecodeKubeProtobuf(Wrap(d));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, Json::parse(kPodTemplateDeploymentJson));
}

}  // namespace
}  // namespace ctrlhost::apiserver
