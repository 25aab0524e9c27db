#include "runtime/observe/server.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/status_macros.h"
#include "runtime/serving/connection_server.h"

namespace ctrlhost::observe {

struct ObserveServer::Impl {
  // Constant after Start().
  ObserveServerOptions options;
  int port = 0;
  std::unique_ptr<serving::ConnectionServer> http;
  std::atomic<bool> stopped{false};

  common::Mutex mu;
  std::map<std::string, std::shared_ptr<const ReadyCheck>> checks ABSL_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<const std::function<std::string()>>> details
      ABSL_GUARDED_BY(mu);
  std::shared_ptr<const DumpProvider> dump ABSL_GUARDED_BY(mu);

  void Metrics(httplib::Response& res) const {
    if (options.metrics == nullptr) {
      res.status = 404;
      res.set_content("metrics are not enabled\n", "text/plain; charset=utf-8");
      return;
    }
    res.set_content(options.metrics->ScrapeText(), kPrometheusTextContentType);
  }

  // kube-apiserver's /readyz format: "[+]name ok" / "[-]name failed: reason" per check in
  // verbose mode or on failure, then "readyz check passed" / "readyz check failed".
  void Readyz(const httplib::Request& req, httplib::Response& res, const std::string& only) {
    std::vector<std::pair<std::string, std::shared_ptr<const ReadyCheck>>> checks_now;
    std::map<std::string, std::shared_ptr<const std::function<std::string()>>> details_now;
    {
      common::MutexLock lock(&mu);
      for (const auto& [name, check] : checks) {
        if (only.empty() || name == only) checks_now.emplace_back(name, check);
      }
      details_now = details;
    }
    if (!only.empty() && checks_now.empty()) {
      res.status = 404;
      res.set_content(absl::StrCat("no readiness check \"", only, "\"\n"),
                      "text/plain; charset=utf-8");
      return;
    }
    std::string lines;
    bool ok = true;
    for (const auto& [name, check] : checks_now) {
      const absl::Status status = (*check)();
      if (status.ok()) {
        auto detail = details_now.find(name);
        const std::string text = detail != details_now.end() ? (*detail->second)() : "";
        absl::StrAppend(&lines, "[+]", name, " ok", text.empty() ? "" : ": ", text, "\n");
      } else {
        ok = false;
        absl::StrAppend(&lines, "[-]", name, " failed: ", status.message(), "\n");
      }
    }
    res.status = ok ? 200 : 503;
    const bool verbose = req.has_param("verbose");
    if (ok && !verbose) {
      res.set_content("ok", "text/plain; charset=utf-8");
      return;
    }
    res.set_content(absl::StrCat(lines, "readyz check ", ok ? "passed" : "failed", "\n"),
                    "text/plain; charset=utf-8");
  }

  void Dump(httplib::Response& res) {
    std::shared_ptr<const DumpProvider> provider;
    {
      common::MutexLock lock(&mu);
      provider = dump;
    }
    if (provider == nullptr) {
      res.status = 503;
      res.set_content("no dump provider is registered yet\n", "text/plain; charset=utf-8");
      return;
    }
    absl::StatusOr<std::string> yaml = (*provider)();
    if (!yaml.ok()) {
      res.status = 500;
      res.set_content(absl::StrCat(yaml.status().ToString(), "\n"), "text/plain; charset=utf-8");
      return;
    }
    res.set_content(*yaml, "application/yaml");
  }
};

absl::StatusOr<std::unique_ptr<ObserveServer>> ObserveServer::Start(
    const ObserveServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("observe server port ", options.port, " is outside 0..65535"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  Impl* raw = impl.get();
  // A thread per connection with bounds, not httplib's fixed pool of 8 threads: 8 idle
  // connections delayed /healthz by the read timeout, 64 made it time out, and a kubelet
  // liveness probe (1 s) would restart a healthy host.
  serving::ConnectionLimits limits;
  limits.name = "observe";
  limits.max_connections = 1024;
  limits.max_unauthenticated = 128;
  ASSIGN_OR_RETURN(impl->http, serving::ConnectionServer::Create(limits, "", ""));
  serving::ConnectionServer& http = *impl->http;
  // httplib's default also sets SO_REUSEPORT, which lets a second process bind the same port
  // and silently share its scrapes; a port in use must be an error instead.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.Get("/metrics",
           [raw](const httplib::Request&, httplib::Response& res) { raw->Metrics(res); });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain; charset=utf-8");
  });
  http.Get("/readyz", [raw](const httplib::Request& req, httplib::Response& res) {
    raw->Readyz(req, res, "");
  });
  http.Get(R"(/readyz/([^/]+))", [raw](const httplib::Request& req, httplib::Response& res) {
    raw->Readyz(req, res, req.matches[1]);
  });
  http.Get("/debug/dump",
           [raw](const httplib::Request&, httplib::Response& res) { raw->Dump(res); });
  ASSIGN_OR_RETURN(impl->port, http.Listen(options.bind, options.port, /*backlog=*/1024));
  std::unique_ptr<ObserveServer> server(new ObserveServer(std::move(impl)));
  common::LogInfo("observe endpoints listening", {{"url", server->url()}});
  return server;
}

ObserveServer::ObserveServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ObserveServer::~ObserveServer() { Stop(); }

int ObserveServer::port() const { return impl_->port; }

serving::ConnectionServer::Stats ObserveServer::connection_stats() const {
  return impl_->http->GetStats();
}

std::string ObserveServer::url() const {
  std::string host = impl_->options.bind == "0.0.0.0" ? "127.0.0.1" : impl_->options.bind;
  if (absl::StrContains(host, ':')) host = absl::StrCat("[", host, "]");
  return absl::StrCat("http://", host, ":", impl_->port);
}

void ObserveServer::SetReadyCheck(const std::string& name, ReadyCheck check) {
  common::MutexLock lock(&impl_->mu);
  impl_->checks[name] = std::make_shared<const ReadyCheck>(std::move(check));
}

void ObserveServer::SetReadyDetail(const std::string& name, std::function<std::string()> detail) {
  common::MutexLock lock(&impl_->mu);
  impl_->details[name] = std::make_shared<const std::function<std::string()>>(std::move(detail));
}

void ObserveServer::RemoveReadyCheck(const std::string& name) {
  common::MutexLock lock(&impl_->mu);
  impl_->checks.erase(name);
  impl_->details.erase(name);
}

void ObserveServer::SetDumpProvider(DumpProvider provider) {
  common::MutexLock lock(&impl_->mu);
  impl_->dump = provider ? std::make_shared<const DumpProvider>(std::move(provider)) : nullptr;
}

void ObserveServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->http->StopListening();
}

}  // namespace ctrlhost::observe
