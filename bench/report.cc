#include "bench/report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::bench {
namespace {

// Few significant digits: benchmark numbers are not more precise than that.
std::string FormatNumber(double value) {
  if (!std::isfinite(value)) return absl::StrCat(value);
  const double magnitude = std::fabs(value);
  if (magnitude >= 100) return absl::StrFormat("%.0f", value);
  if (magnitude >= 1) return absl::StrFormat("%.2f", value);
  if (magnitude == 0) return "0";
  return absl::StrFormat("%.3g", value);
}

// JSON has no NaN or infinity: such values become null rather than invalid output.
nlohmann::json JsonNumber(double value) {
  if (!std::isfinite(value)) return nullptr;
  return value;
}

}  // namespace

std::optional<double> Figure::EffectiveRatio() const {
  if (ratio.has_value()) return ratio;
  if (baseline.has_value() && *baseline != 0) return value / *baseline;
  return std::nullopt;
}

Reporter::Reporter(std::string bench_name, int argc, char** argv)
    : bench_name_(std::move(bench_name)) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json") {
      json_ = true;
    } else {
      args_.push_back(argv[i]);
    }
  }
}

void Reporter::Add(Figure figure) { figures_.push_back(std::move(figure)); }

std::string Reporter::FormatJson(const Figure& figure) const {
  nlohmann::ordered_json line = {{"bench", bench_name_},
                                 {"metric", figure.metric},
                                 {"value", JsonNumber(figure.value)},
                                 {"unit", figure.unit}};
  if (figure.baseline.has_value()) line["baseline"] = JsonNumber(*figure.baseline);
  if (std::optional<double> ratio = figure.EffectiveRatio()) line["ratio"] = JsonNumber(*ratio);
  if (figure.target.has_value()) line["target"] = *figure.target;
  if (figure.met.has_value()) line["met"] = *figure.met;
  // Metric names are ours, but replace invalid UTF-8 rather than throw if one ever is not.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Reporter::FormatTable() const {
  std::vector<std::vector<std::string>> rows = {
      {"METRIC", "VALUE", "UNIT", "BASELINE", "RATIO", "TARGET", "MET"}};
  for (const Figure& f : figures_) {
    std::optional<double> ratio = f.EffectiveRatio();
    rows.push_back({f.metric, FormatNumber(f.value), f.unit,
                    f.baseline.has_value() ? FormatNumber(*f.baseline) : "-",
                    ratio.has_value() ? absl::StrCat(FormatNumber(*ratio), "x") : "-",
                    f.target.value_or("-"), f.met.has_value() ? (*f.met ? "yes" : "NO") : "-"});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out = absl::StrCat("# ", bench_name_, "\n");
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      // Numbers right-aligned, text left-aligned.
      const bool numeric = i == 1 || i == 3 || i == 4;
      const std::string pad(widths[i] - row[i].size(), ' ');
      absl::StrAppend(&line, numeric ? pad + row[i] : row[i] + pad, "  ");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

void Reporter::Print(std::ostream& out) const {
  if (json_) {
    for (const Figure& figure : figures_) out << FormatJson(figure) << "\n";
  } else {
    out << FormatTable();
  }
  out.flush();
}

int Reporter::Finish() const {
  Print(std::cout);
  for (const Figure& figure : figures_) {
    if (figure.met.has_value() && !*figure.met) return 1;
  }
  return 0;
}

absl::Duration Percentile(std::vector<absl::Duration> samples, double p) {
  if (samples.empty()) return absl::ZeroDuration();
  p = std::clamp(p, 0.0, 100.0);
  std::sort(samples.begin(), samples.end());
  // Nearest rank: ceil(p/100 * n), 1-based; p = 0 gives the minimum.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  if (rank == 0) rank = 1;
  return samples[std::min(rank, samples.size()) - 1];
}

std::optional<std::string> FindBuiltBinary(const char* argv0, const std::string& rel) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates = {absl::StrCat(argv0, ".runfiles/ctrlhost/", rel)};
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(absl::StrCat(self.string(), ".runfiles/ctrlhost/", rel));
    // bazel-bin/bench/<dir>/<name> -> bazel-bin/<rel>
    candidates.push_back(self.parent_path().parent_path().parent_path() / rel);
  }
  for (const fs::path& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) return fs::absolute(candidate, ec).string();
  }
  return std::nullopt;
}

}  // namespace ctrlhost::bench
