// Published per-op benchmarks: EPO's figure for each row, the error statistics, the report as
// text and JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "calibration/op_bench.hpp"
#include "calibration/published_detail.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/routing_stats.hpp"

namespace epo::calib {

namespace {

using namespace detail;

/// Expected distinct destination ranks and NVLink domains of a token (own included), as the
/// cost model's routing statistics give them.
std::pair<double, double> distinct_of(const model::Config& c) {
  const auto& m = c.model;
  const model::RoutingShape rs{m.num_experts, m.router_topk, m.router_num_groups,
                               m.router_group_topk, c.par.ep};
  return {model::expected_distinct_ranks(rs),
          model::expected_distinct_units(rs, c.ep_num_domains())};
}

/// A MoE layer's part, not the attention's (which the single-layer test does not run).
bool moe_part(const model::Component& p) {
  const std::string n = p.name;
  return n.rfind("attn.", 0) != 0 && n.rfind("tp.", 0) != 0 && n.rfind("cp.", 0) != 0 &&
         n != "norm";
}

/// Device time of one MoE layer of one micro-batch in `dir`: the MoE parts of pre_dispatch
/// (shared expert, router, dispatch preprocessing), dispatch, experts and combine, ms.
double layer_ms(const model::Config& c, model::Direction dir) {
  const model::StepCosts costs = model::compute_step_costs(c);
  double us = 0;
  for (const auto& op : costs.moe_layer.ops) {
    if (op.dir != dir) continue;
    const bool pre = op.kind == model::OpKind::pre_dispatch;
    if (!pre && op.kind != model::OpKind::dispatch && op.kind != model::OpKind::mlp &&
        op.kind != model::OpKind::combine)
      continue;
    for (const auto& p : op.parts)
      if (!pre || moe_part(p)) us += p.duration_us;
  }
  return us / 1e3;
}

}  // namespace

double predict_op_time_us(const OpBenchRow& row) {
  if (!row.config) return kNaN;
  const model::Config& c = *row.config;
  double us = model::ep_token_exchange(c, row.elem_bytes).duration_us;
  if (row.timing == "torch_api" && c.opt.dispatcher == model::Dispatcher::flex &&
      c.opt.flex_backend == model::FlexBackend::hybridep) {
    // HybridEP's torch API copies the received rows out of its registered buffer (dispatch) or
    // the rows to send into it (combine): README_Hybrid-EP.md, "dispatch = dispatch_kernel + d2d
    // + misc". A read and a write of every received row.
    const double recv_bytes =
        c.tokens_per_microbatch() * distinct_of(c).first * c.model.hidden_size * row.elem_bytes;
    us += model::memory_time_us(c.hw, 2.0 * recv_bytes);
  }
  return us;
}

double predict_op_row(const OpBenchRow& row) {
  if (!row.config) return kNaN;
  const model::Config& c = *row.config;
  switch (row.quantity) {
    case OpQuantity::layer_forward_ms:
      return layer_ms(c, model::Direction::forward);
    case OpQuantity::layer_backward_ms:
      return layer_ms(c, model::Direction::backward);
    case OpQuantity::nvl_bandwidth:
    case OpQuantity::net_bandwidth: {
      const auto [ranks, domains] = distinct_of(c);
      const double rows_per_token = row.quantity == OpQuantity::nvl_bandwidth ? ranks : domains;
      const double bytes =
          c.tokens_per_microbatch() * rows_per_token * c.model.hidden_size * row.elem_bytes;
      return bytes / (predict_op_time_us(row) * 1e3);  // bytes per us / 1e3 = GB/s
    }
    case OpQuantity::none:
      break;
  }
  return kNaN;
}

void OpSelect::add(const std::string& term) {
  const auto colon = term.find(':');
  const std::string field = term.substr(0, colon);
  static const std::vector<std::string> kFields = {"library", "system", "kind",
                                                   "timing",  "ranks",  "cluster"};
  EPO_REQUIRE_INPUT(colon != std::string::npos &&
                        std::find(kFields.begin(), kFields.end(), field) != kFields.end(),
                    "--fit-on '", term,
                    "' (allowed: field:value[,value...] with field one of library, system, kind, "
                    "timing, ranks, cluster)");
  std::vector<std::string> values;
  std::stringstream rest(term.substr(colon + 1));
  for (std::string v; std::getline(rest, v, ',');)
    if (!v.empty()) values.push_back(v);
  EPO_REQUIRE_INPUT(!values.empty(), "--fit-on '", term, "' names no value");
  terms.emplace_back(field, values);
}

bool OpSelect::matches(const OpBenchRow& r) const {
  for (const auto& [field, values] : terms) {
    const std::string v = field == "library"  ? r.library_label
                          : field == "system" ? r.system_label
                          : field == "kind"   ? r.kind
                          : field == "timing" ? r.timing
                          : field == "ranks"  ? std::to_string(r.ranks)
                                              : r.cluster;
    if (std::find(values.begin(), values.end(), v) == values.end()) return false;
  }
  return true;
}

std::string OpSelect::describe() const {
  std::string s;
  for (const auto& [field, values] : terms) {
    s += (s.empty() ? "" : " ") + field + ":";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + values[i];
  }
  return s;
}

OpComparedRow::OpComparedRow() : predicted(kNaN), error_pct(kNaN) {}

OpReport compare_op_benchmarks(const std::vector<OpBenchRow>& rows, const OpSelect& fit_on) {
  OpReport rep;
  std::map<std::string, std::vector<double>> groups;
  for (const auto& r : rows) {
    OpComparedRow c;
    c.row = &r;
    if (!r.config) {
      ++rep.unsupported;
      rep.rows.push_back(c);
      continue;
    }
    c.predicted = predict_op_row(r);
    c.error_pct = (c.predicted / r.published - 1) * 100;
    if (!fit_on.empty()) c.split = fit_on.matches(r) ? "fit" : "check";
    if (std::isfinite(c.error_pct)) {
      groups["all"].push_back(c.error_pct);
      groups["group:" + r.group()].push_back(c.error_pct);
      if (!r.timing.empty()) groups["timing:" + r.timing].push_back(c.error_pct);
      if (!c.split.empty()) {
        groups[c.split].push_back(c.error_pct);
        groups[c.split + ":" + r.group()].push_back(c.error_pct);
      }
    }
    rep.rows.push_back(c);
  }
  for (const auto& [k, v] : groups) rep.by_group[k] = error_stats(v);
  return rep;
}

namespace {

std::string fmt(double v, const char* f = "%.2f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

nlohmann::json num_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

nlohmann::json str_or_null(const std::string& s) {
  return s.empty() ? nlohmann::json() : nlohmann::json(s);
}

}  // namespace

std::string op_report_text(const OpReport& rep) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-52s %-11s %5s %4s %-11s %10s %10s %7s %-6s %s\n", "# id",
                "cluster", "ranks", "sms", "timing", "published", "predicted", "err_%", "unit",
                "split");
  os << line;
  for (const auto& c : rep.rows) {
    const OpBenchRow& r = *c.row;
    if (!r.config) continue;
    std::snprintf(line, sizeof line, "%-52.52s %-11s %5d %4s %-11s %10s %10s %7s %-6s %s\n",
                  r.id.c_str(), r.cluster.c_str(), r.ranks,
                  r.num_sms > 0 ? std::to_string(r.num_sms).c_str() : "-",
                  r.timing.empty() ? "-" : r.timing.c_str(), fmt(r.published).c_str(),
                  fmt(c.predicted).c_str(), fmt(c.error_pct, "%+.1f").c_str(),
                  r.unit.substr(0, 6).c_str(), c.split.c_str());
    os << line;
  }
  os << "\n# rows not modelled\n";
  for (const auto& c : rep.rows)
    if (!c.row->config) os << "  " << c.row->id << ": " << c.row->unsupported << "\n";
  os << "\n# error of the published figure (bandwidth in the row's definition, or ms)\n";
  std::snprintf(line, sizeof line, "%-46s %4s %10s %8s %10s\n", "# group", "n", "median|%|",
                "p90|%|", "mean_%");
  os << line;
  for (const auto& [k, s] : rep.by_group) {
    std::snprintf(line, sizeof line, "%-46s %4d %10.1f %8.1f %+10.1f\n", k.c_str(), s.n,
                  s.median_abs_pct, s.p90_abs_pct, s.mean_signed_pct);
    os << line;
  }
  std::snprintf(line, sizeof line, "\n# %d rows not modelled\n", rep.unsupported);
  os << line;
  return os.str();
}

nlohmann::json to_json(const OpReport& rep) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& c : rep.rows) {
    const OpBenchRow& r = *c.row;
    rows.push_back({{"id", r.id},
                    {"library", r.library},
                    {"system", r.system},
                    {"kind", r.kind},
                    {"measurement", r.measurement},
                    {"metric", r.metric},
                    {"unit", r.unit},
                    {"group", r.group()},
                    {"cluster", str_or_null(r.cluster)},
                    {"timing", str_or_null(r.timing)},
                    {"ranks", r.ranks > 0 ? nlohmann::json(r.ranks) : nlohmann::json()},
                    {"num_sms", r.num_sms > 0 ? nlohmann::json(r.num_sms) : nlohmann::json()},
                    {"published", num_or_null(r.published)},
                    {"predicted", num_or_null(c.predicted)},
                    {"error_pct", num_or_null(c.error_pct)},
                    {"split", str_or_null(c.split)},
                    {"assumptions", r.assumptions},
                    {"unsupported", r.config ? nlohmann::json() : nlohmann::json(r.unsupported)}});
  }
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [k, s] : rep.by_group)
    groups[k] = {{"n", s.n},
                 {"median_abs_pct", s.median_abs_pct},
                 {"p90_abs_pct", s.p90_abs_pct},
                 {"mean_signed_pct", s.mean_signed_pct}};
  return {{"schema_version", 1},
          {"rows", rows},
          {"summary", {{"error_pct", groups}, {"unsupported_rows", rep.unsupported}}}};
}

}  // namespace epo::calib
