#include <algorithm>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string plan_title(const nlohmann::json& p, const std::string& where) {
  return text(p, "key", where) + ": " + fmt_num(number(p, "step_time_us", where) / 1e3) + " ms, " +
         fmt_num(number(p, "memory_bytes", where) / kGiB) + " GiB, " +
         fmt_num(number(p, "tokens_per_s_per_gpu", where)) + " tokens/s per GPU";
}

void add_points(ScatterSpec& spec, int series, const nlohmann::json& plans,
                const std::string& where, const std::string& prefix = {}) {
  for (const auto& p : plans) {
    const nlohmann::json& plan = p.contains("plan") ? p["plan"] : p;
    spec.points.push_back({series, number(plan, "memory_bytes", where) / kGiB,
                           number(plan, "step_time_us", where) / 1e3,
                           prefix + plan_title(plan, where)});
  }
}

void plan_scatter(Page& page, const nlohmann::json& s, const std::string& where) {
  ScatterSpec spec;
  spec.title = "Plans: step time against memory per GPU";
  spec.x_label = "memory per GPU (GiB)";
  spec.y_label = "step time (ms)";
  spec.series = {{"top plans", palette(0), false, false, 4},
                 {"Pareto front", palette(1), false, true, 4},
                 {"reference plans", palette(3), true, false, 6},
                 {"winner", "#111", false, false, 6}};
  add_points(spec, 0, array(s, "top", where), where);
  add_points(spec, 1, array(s, "pareto", where), where, "Pareto front: ");
  for (const auto& r : array(s, "references", where)) {
    EPO_REQUIRE_INPUT(r.contains("plan"), where, ": search.references entry has no 'plan'");
    add_points(spec, 2, nlohmann::json::array({r["plan"]}), where, text(r, "label", where) + ": ");
  }
  const nlohmann::json top = array(s, "top", where);
  if (!top.empty()) add_points(spec, 3, nlohmann::json::array({top[0]}), where, "winner: ");
  const double cap = number(s, "capacity_bytes", where, -1);
  if (cap > 0)
    spec.x_limit = cap / kGiB, spec.x_limit_label = "capacity " + fmt_num(cap / kGiB) + " GiB";
  page.chart(scatter_svg(spec));
}

/// The winner's per-op time against each compared plan (runners-up and references).
void comparisons(Page& page, const nlohmann::json& s, const std::string& where) {
  const nlohmann::json comps = array(s, "comparisons", where);
  if (comps.empty()) return;
  BarSpec spec;
  spec.title =
      "The winner's ops against the runners-up and the reference plans (per step, one rank)";
  spec.value_label = "time per step (ms)";
  spec.unit = "ms";
  spec.series.push_back("winner");
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : comps) {
    spec.series.push_back(text(c, "label", where));
    rows.push_back({text(c, "label", where), text(c, "reference_key", where),
                    fmt_num(number(c, "step_delta_us", where) / 1e3),
                    fmt_num(number(c, "hidden_us", where) / 1e3),
                    fmt_num(100 * number(c, "tokens_gain", where))});
  }
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    for (const auto& op : array(comps[ci], "ops", where)) {
      const std::string name = text(op, "name", where);
      size_t g = 0;
      while (g < spec.groups.size() && spec.groups[g] != name) ++g;
      if (g == spec.groups.size()) {
        spec.groups.push_back(name);
        spec.values.push_back(std::vector<double>(spec.series.size(), kNaN));
        spec.values[g][0] = number(op, "winner_us", where) / 1e3;
      }
      spec.values[g][ci + 1] = number(op, "reference_us", where) / 1e3;
    }
  }
  page.chart(bar_svg(spec));
  page.table({"compared with", "plan", "winner faster by (ms)", "communication hidden (ms)",
              "tokens/s gain (%)"},
             rows);
}

void rejected(Page& page, const nlohmann::json& s, const std::string& where) {
  const nlohmann::json& rej = s.contains("rejected") ? s["rejected"] : nlohmann::json::object();
  EPO_REQUIRE_INPUT(rej.is_object(), where, ": search.rejected is not an object");
  std::vector<std::pair<double, std::string>> counts;
  for (const auto& [rule, n] : rej.items()) {
    EPO_REQUIRE_INPUT(n.is_number(), where, ": search.rejected.", rule, " is not a number");
    counts.push_back({n.get<double>(), rule});
  }
  std::sort(counts.rbegin(), counts.rend());
  BarSpec spec;
  spec.title = "Candidates rejected, by the first check they fail";
  spec.value_label = "candidates";
  spec.series = {"rejected"};
  for (const auto& [n, rule] : counts) spec.groups.push_back(rule), spec.values.push_back({n});
  page.chart(bar_svg(spec));
}

}  // namespace

std::string render_plan(const nlohmann::json& doc, const std::string& where) {
  const nlohmann::json& s = need(doc, "search", where);
  Page page("EPO plan");
  page.para("Winner: " + config_line(doc.value("config", nlohmann::json()), where));
  page.para("Searched " + fmt_num(number(s, "generated", where)) + " candidates in " +
            fmt_num(number(s, "seconds", where)) + " s: " + fmt_num(number(s, "evaluated", where)) +
            " predicted, " + fmt_num(number(s, "feasible", where)) +
            " feasible. The chart shows "
            "the plans the search keeps: the top plans, the Pareto front and the reference plans.");
  if (doc.contains("prediction")) prediction_summary(page, doc["prediction"], where);
  // Older plan files have no warnings; an empty list says validate found none.
  if (s.contains("warnings") && !array(s, "warnings", where).empty()) {
    page.heading("Warnings on the winner (epo validate)");
    std::vector<std::vector<std::string>> warned;
    for (const auto& w : array(s, "warnings", where))
      warned.push_back({text(w, "id", where), text(w, "message", where), text(w, "source", where)});
    page.table({"rule", "what", "source"}, warned);
  }
  page.heading("Step time against memory");
  plan_scatter(page, s, where);
  page.heading("Why the winner wins");
  comparisons(page, s, where);
  page.heading("Rejected candidates");
  rejected(page, s, where);
  page.heading("Top plans");
  std::vector<std::vector<std::string>> rows;
  int i = 0;
  for (const auto& p : array(s, "top", where))
    rows.push_back({std::to_string(++i), text(p, "key", where),
                    fmt_num(number(p, "step_time_us", where) / 1e3),
                    fmt_num(number(p, "exposed_comm_us", where) / 1e3),
                    fmt_num(number(p, "memory_bytes", where) / kGiB),
                    fmt_num(number(p, "tokens_per_s_per_gpu", where)),
                    fmt_num(100 * number(p, "mfu", where))});
  page.table({"#", "plan", "step (ms)", "exposed (ms)", "memory per GPU (GiB)", "tokens/s per GPU",
              "MFU (%)"},
             rows);
  if (doc.contains("prediction")) {
    page.heading("The winner's memory per GPU");
    memory_chart(page, doc["prediction"], where);
  }
  return page.str();
}

}  // namespace epo::report::detail
