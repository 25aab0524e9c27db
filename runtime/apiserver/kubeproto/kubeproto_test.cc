// Golden bodies captured from the real kubectl 1.32 (testdata/*.pb) against what the same
// command prints with `-o json --dry-run=client` (testdata/*.json), plus every error path:
// unknown fields (415), unsupported kinds and encodings (415), malformed bytes (400), and
// truncated, mutated and random bodies that must never crash.
#include "runtime/apiserver/kubeproto/kubeproto.h"

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/kubeproto/apps_v1.pb.h"
#include "runtime/apiserver/kubeproto/core_v1.pb.h"
#include "runtime/apiserver/kubeproto/core_v1_pod.pb.h"
#include "runtime/apiserver/kubeproto/runtime.pb.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

namespace kp = ::ctrlhost::kubeproto;
using Json = nlohmann::json;

constexpr char kTestdata[] = "runtime/apiserver/kubeproto/testdata/";

// kubectl create commands whose request bodies were captured (see testdata/README.md).
const char* const kGoldens[] = {
    "namespace",      "configmap",          "secret",           "secret_dockerregistry",
    "serviceaccount", "service_clusterip",  "service_nodeport", "service_externalname",
    "deployment",     "deployment_command",
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// kubectl prints Go's zero times as null ("creationTimestamp": null); we leave them out.
Json WithoutNulls(const Json& j) {
  if (j.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) {
      if (!v.is_null()) out[k] = WithoutNulls(v);
    }
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& v : j) out.push_back(WithoutNulls(v));
    return out;
  }
  return j;
}

std::string Wrap(const std::string& api_version, const std::string& kind, const std::string& raw) {
  kp::runtime::Unknown envelope;
  envelope.mutable_typemeta()->set_apiversion(api_version);
  envelope.mutable_typemeta()->set_kind(kind);
  envelope.set_raw(raw);
  return std::string("k8s\0", 4) + envelope.SerializeAsString();
}

std::string Wrap(const std::string& api_version, const std::string& kind,
                 const google::protobuf::Message& m) {
  return Wrap(api_version, kind, m.SerializeAsString());
}

TEST(KubeProtoTest, GoldenBodiesFromKubectlEqualItsJson) {
  for (const char* name : kGoldens) {
    SCOPED_TRACE(name);
    const std::string dir = kTestdata;
    absl::StatusOr<Json> got = DecodeKubeProtobuf(ReadFile(dir + name + ".pb"));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, WithoutNulls(Json::parse(ReadFile(dir + name + ".json"))));
  }
}

TEST(KubeProtoTest, ContentTypeConstant) {
  EXPECT_EQ(kProtobufContentType, "application/vnd.kubernetes.protobuf");
}

TEST(KubeProtoTest, UnknownFieldDeepInsideIs415NamingMessageAndNumber) {
  kp::apps::v1::Deployment d;
  d.mutable_metadata()->set_name("web");
  d.mutable_spec()->mutable_template_()->mutable_spec()->mutable_unknown_fields()->AddVarint(42, 1);
  absl::Status s = DecodeKubeProtobuf(Wrap("apps/v1", "Deployment", d)).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  EXPECT_EQ(s.message(),
            "protobuf field 42 of k8s.io.api.core.v1.PodSpec is not supported by this server; "
            "send application/json");
}

TEST(KubeProtoTest, UnknownFieldInRepeatedAndMapValuesIs415) {
  kp::core::v1::PodSpec pod;
  kp::core::v1::Container* c = pod.add_containers();
  c->set_name("a");
  c->mutable_unknown_fields()->AddLengthDelimited(99, "x");
  kp::apps::v1::Deployment d;
  *d.mutable_spec()->mutable_template_()->mutable_spec() = pod;
  absl::Status s = DecodeKubeProtobuf(Wrap("apps/v1", "Deployment", d)).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "field 99 of k8s.io.api.core.v1.Container")) << s;

  kp::apps::v1::Deployment q;
  kp::core::v1::Container* qc =
      q.mutable_spec()->mutable_template_()->mutable_spec()->add_containers();
  (*qc->mutable_resources()->mutable_limits())["cpu"].mutable_unknown_fields()->AddVarint(7, 1);
  s = DecodeKubeProtobuf(Wrap("apps/v1", "Deployment", q)).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "k8s.io.apimachinery.pkg.api.resource.Quantity")) << s;
}

TEST(KubeProtoTest, UnknownFieldInEnvelopeIs415) {
  std::string body = Wrap("v1", "Namespace", kp::core::v1::Namespace());
  body += std::string("\x28\x01", 2);  // field 5, varint 1
  absl::Status s = DecodeKubeProtobuf(body).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "k8s.io.apimachinery.pkg.runtime.Unknown")) << s;
}

TEST(KubeProtoTest, DeclaredFieldWithWrongWireTypeIs400) {
  // ConfigMap field 1 (metadata) sent as a varint.
  absl::Status s = DecodeKubeProtobuf(Wrap("v1", "ConfigMap", std::string("\x08\x01", 2))).status();
  EXPECT_EQ(kube::HttpCode(s), 400) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "wrong wire type")) << s;
}

TEST(KubeProtoTest, UnsupportedKindIs415) {
  absl::Status s = DecodeKubeProtobuf(Wrap("v1", "Pod", "")).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  EXPECT_EQ(s.message(),
            "protobuf bodies of v1 Pod are not supported by this server; send application/json");
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("apps/v1", "Namespace", "")).status()), 415);
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("batch/v1", "Job", "")).status()), 415);
}

TEST(KubeProtoTest, ContentEncodingAndForeignContentTypeAre415) {
  kp::runtime::Unknown envelope;
  envelope.mutable_typemeta()->set_apiversion("v1");
  envelope.mutable_typemeta()->set_kind("Namespace");
  envelope.set_contentencoding("gzip");
  absl::Status s =
      DecodeKubeProtobuf(std::string("k8s\0", 4) + envelope.SerializeAsString()).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "gzip")) << s;
  envelope.clear_contentencoding();
  envelope.set_contenttype("application/json");
  s = DecodeKubeProtobuf(std::string("k8s\0", 4) + envelope.SerializeAsString()).status();
  EXPECT_EQ(kube::HttpCode(s), 415) << s;
  envelope.set_contenttype("application/vnd.kubernetes.protobuf");
  EXPECT_TRUE(DecodeKubeProtobuf(std::string("k8s\0", 4) + envelope.SerializeAsString()).ok());
}

TEST(KubeProtoTest, MalformedBodiesAre400) {
  for (const std::string& body : {std::string(), std::string("k8s"), std::string("{\"kind\":1}"),
                                  std::string("k8s\x01", 4)}) {
    absl::Status s = DecodeKubeProtobuf(body).status();
    EXPECT_EQ(kube::HttpCode(s), 400) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "magic")) << s;
  }
  // Magic, then a length-delimited field 1 claiming 100 bytes that are not there.
  absl::Status s = DecodeKubeProtobuf(std::string("k8s\0\x0a\x64\x0a", 7)).status();
  EXPECT_EQ(kube::HttpCode(s), 400) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "runtime.Unknown")) << s;
  // A good envelope around a truncated object.
  kp::core::v1::ConfigMap cm;
  cm.mutable_metadata()->set_name("a-long-enough-name");
  std::string raw = cm.SerializeAsString();
  s = DecodeKubeProtobuf(Wrap("v1", "ConfigMap", raw.substr(0, raw.size() - 3))).status();
  EXPECT_EQ(kube::HttpCode(s), 400) << s;
  EXPECT_EQ(s.message(), "the protobuf v1 ConfigMap in the request body is truncated or malformed");
  // No kind.
  s = DecodeKubeProtobuf(Wrap("v1", "", "")).status();
  EXPECT_EQ(kube::HttpCode(s), 400) << s;
}

TEST(KubeProtoTest, InvalidValuesAre400) {
  kp::core::v1::ConfigMap cm;
  cm.mutable_metadata()->set_name(std::string("bad\xff", 4));
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "ConfigMap", cm)).status()), 400);

  cm.Clear();
  (*cm.mutable_data())[std::string("\xc0\x80", 2)] = "overlong NUL";
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "ConfigMap", cm)).status()), 400);

  cm.Clear();
  cm.mutable_metadata()->mutable_creationtimestamp()->set_seconds(int64_t{1} << 60);
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "ConfigMap", cm)).status()), 400);
  cm.mutable_metadata()->mutable_creationtimestamp()->set_seconds(1);
  cm.mutable_metadata()->mutable_creationtimestamp()->set_nanos(-1);
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "ConfigMap", cm)).status()), 400);

  cm.Clear();
  cm.mutable_metadata()->add_managedfields()->mutable_fieldsv1()->set_raw("{not json");
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "ConfigMap", cm)).status()), 400);
  cm.mutable_metadata()->mutable_managedfields(0)->mutable_fieldsv1()->set_raw(
      std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "ConfigMap", cm)).status()), 400);

  kp::core::v1::Service svc;
  svc.mutable_spec()->add_ports()->mutable_targetport()->set_type(2);
  EXPECT_EQ(kube::HttpCode(DecodeKubeProtobuf(Wrap("v1", "Service", svc)).status()), 400);
}

// Every prefix, many single-byte mutations and random bodies: each answer is a value or a 400/
// 415, never a crash (the sanitizer configs make this test meaningful for memory errors too).
TEST(KubeProtoTest, TruncatedMutatedAndRandomBodiesNeverCrash) {
  const std::string golden = ReadFile(std::string(kTestdata) + "deployment.pb");
  auto check = [](const std::string& body) {
    absl::StatusOr<Json> j = DecodeKubeProtobuf(body);
    if (j.ok()) {
      EXPECT_TRUE(j->is_object());
      (void)j->dump();  // must serialize (valid UTF-8 everywhere)
    } else {
      const int code = kube::HttpCode(j.status());
      EXPECT_TRUE(code == 400 || code == 415) << j.status();
    }
  };
  for (size_t n = 0; n < golden.size(); ++n) {
    check(golden.substr(0, n));
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    std::string body = golden;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      body[4 + rng() % (body.size() - 4)] = static_cast<char>(rng());
    }
    check(body);
  }
  for (int i = 0; i < 5000; ++i) {
    std::string body("k8s\0", 4);
    const size_t len = rng() % 200;
    for (size_t k = 0; k < len; ++k) body.push_back(static_cast<char>(rng()));
    check(body);
  }
}

}  // namespace
}  // namespace ctrlhost::apiserver
