#include "model/pipeline_layout.hpp"

#include <algorithm>
#include <cctype>

#include "model/error.hpp"
#include "model/schedule.hpp"

namespace epo::model {

namespace {

/// Reads the repeat count after "*" at s[pos]; pos ends past the digits.
int read_count(const std::string& s, std::size_t& pos, const std::string& layout) {
  EPO_REQUIRE_INPUT(pos < s.size() && s[pos] == '*', "pipeline_layout = \"", layout,
                    "\": expected '*n' at position ", pos);
  ++pos;
  const std::size_t start = pos;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  EPO_REQUIRE_INPUT(pos > start && pos - start < 7, "pipeline_layout = \"", layout,
                    "\": '*' must be followed by a count");
  return std::stoi(s.substr(start, pos - start));
}

std::string repeat(const std::string& x, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += x;
  return out;
}

/// Megatron's two substitutions, in its order: "(...)*n" (innermost group), then "x*n".
std::string unroll(std::string s, const std::string& layout) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  for (std::size_t close; (close = s.find(')')) != std::string::npos;) {
    const std::size_t open = s.rfind('(', close);
    EPO_REQUIRE_INPUT(open != std::string::npos, "pipeline_layout = \"", layout,
                      "\": unbalanced ')'");
    std::size_t pos = close + 1;
    const int n = read_count(s, pos, layout);
    s = s.substr(0, open) + repeat(s.substr(open + 1, close - open - 1), n) + s.substr(pos);
  }
  EPO_REQUIRE_INPUT(s.find('(') == std::string::npos, "pipeline_layout = \"", layout,
                    "\": unbalanced '('");
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && s[i + 1] == '*') {
      std::size_t pos = i + 1;
      out += repeat(std::string(1, s[i]), read_count(s, pos, layout));
      i = pos;
    } else {
      out += s[i++];
    }
  }
  return out;
}

PipelinePlacement from_layout(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const std::string& layout = p.pipeline_layout;
  const std::vector<std::string> stages = parse_pipeline_layout(layout);
  EPO_REQUIRE_INPUT(static_cast<int>(stages.size()) == p.pp * p.vpp, "pipeline_layout = \"", layout,
                    "\" has ", stages.size(), " stages (allowed: pp*vpp = ", p.pp * p.vpp, ")");
  PipelinePlacement pl;
  pl.pp = p.pp;
  pl.vpp = p.vpp;
  int layer = 0, embeddings = 0, losses = 0, mtps = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    VirtualStage v;
    v.first_layer = layer;
    for (char c : stages[i]) {
      if (c == 't') ++v.num_layers;
      if (c == 'm') ++v.mtp_layers;
      if (c == 'E') v.embedding = true, ++embeddings;
      if (c == 'L') v.loss = true, ++losses;
    }
    EPO_REQUIRE_INPUT(!v.embedding || (i == 0 && stages[i][0] == 'E'), "pipeline_layout = \"",
                      layout, "\": E must open the first stage");
    EPO_REQUIRE_INPUT(!v.loss || (i + 1 == stages.size() && stages[i].back() == 'L'),
                      "pipeline_layout = \"", layout, "\": L must close the last stage");
    layer += v.num_layers;
    mtps += v.mtp_layers;
    pl.stages.push_back(v);
  }
  EPO_REQUIRE_INPUT(embeddings == 1 && losses == 1, "pipeline_layout = \"", layout,
                    "\" must hold E and L exactly once");
  EPO_REQUIRE_INPUT(layer == m.num_layers, "pipeline_layout = \"", layout, "\" places ", layer,
                    " decoder layers 't' (allowed: the model's num_layers = ", m.num_layers, ")");
  EPO_REQUIRE_INPUT(mtps == m.mtp_num_layers, "pipeline_layout = \"", layout, "\" places ", mtps,
                    " MTP layers 'm' (allowed: the model's mtp_num_layers = ", m.mtp_num_layers,
                    ")");
  return pl;
}

/// Decoder layers per virtual stage without a layout (Megatron's get_num_layers_to_build).
std::vector<int> split_layers(const Config& cfg) {
  const Parallel& p = cfg.par;
  const int L = cfg.model.num_layers, P = p.pp, V = p.vpp, S = P * V;
  std::vector<int> per(static_cast<std::size_t>(S), 0);
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0) {
    EPO_REQUIRE_INPUT(P > 1, "num_layers_in_first/last_pipeline_stage need pp > 1");
    const int uneven = (p.first_stage_layers > 0) + (p.last_stage_layers > 0);
    const int middle = L - p.first_stage_layers - p.last_stage_layers;
    const int middle_ranks = P - uneven;
    EPO_REQUIRE_INPUT(middle >= 0 && (middle_ranks == 0 ? middle == 0 : middle % middle_ranks == 0),
                      "num_layers_in_first/last_pipeline_stage = ", p.first_stage_layers, "/",
                      p.last_stage_layers, " leave ", middle, " layers for ", middle_ranks,
                      " middle ranks (allowed: an equal share each)");
    const int mid = middle_ranks > 0 ? middle / middle_ranks : 0;
    for (int r = 0; r < P; ++r) {
      int n = mid;
      if (r == 0 && p.first_stage_layers > 0) n = p.first_stage_layers;
      if (r == P - 1 && p.last_stage_layers > 0) n = p.last_stage_layers;
      EPO_REQUIRE_INPUT(n % V == 0, "pipeline rank ", r, " holds ", n,
                        " layers, not divisible by vpp = ", V);
      for (int c = 0; c < V; ++c) per[static_cast<std::size_t>(c * P + r)] = n / V;
    }
    return per;
  }
  const int emb = p.account_for_embedding_in_pipeline_split ? 1 : 0;
  const int loss = p.account_for_loss_in_pipeline_split ? 1 : 0;
  if ((L + emb + loss) % S == 0) {
    std::fill(per.begin(), per.end(), (L + emb + loss) / S);
    per.front() -= emb;
    per.back() -= loss;
    EPO_REQUIRE_INPUT(per.front() >= 0 && per.back() >= 0,
                      "account_for_embedding/loss_in_pipeline_split leave a stage with no room");
    return per;
  }
  // Megatron rejects an uneven split; the schedule spreads the remainder, and so does memory.
  return layers_per_virtual_stage(L, P, V);
}

}  // namespace

std::vector<std::string> parse_pipeline_layout(const std::string& layout) {
  const std::string flat = unroll(layout, layout);
  std::vector<std::string> stages(1);
  for (char c : flat) {
    if (c == '|') {
      stages.emplace_back();
      continue;
    }
    EPO_REQUIRE_INPUT(c == 'E' || c == 't' || c == 'm' || c == 'L', "pipeline_layout = \"", layout,
                      "\": symbol '", std::string(1, c),
                      "' (allowed: E embedding, t decoder layer, m MTP layer, L loss, | stage "
                      "break, (...)*n and x*n repeats)");
    stages.back() += c;
  }
  return stages;
}

PipelinePlacement pipeline_placement(const Config& cfg) {
  PipelinePlacement pl;
  if (!cfg.par.pipeline_layout.empty()) {
    // The planner asks for one layout with many option sets in a row: parse it once per thread.
    struct Memo {
      std::string layout;
      int pp = 0, vpp = 0, layers = -1, mtp = -1;
      PipelinePlacement placed;
    };
    thread_local Memo memo;
    const Parallel& p = cfg.par;
    if (memo.layout != p.pipeline_layout || memo.pp != p.pp || memo.vpp != p.vpp ||
        memo.layers != cfg.model.num_layers || memo.mtp != cfg.model.mtp_num_layers) {
      memo.placed = from_layout(cfg);  // throws on a bad layout: the memo keeps the last good one
      memo.layout = p.pipeline_layout;
      memo.pp = p.pp;
      memo.vpp = p.vpp;
      memo.layers = cfg.model.num_layers;
      memo.mtp = cfg.model.mtp_num_layers;
    }
    pl = memo.placed;
  } else {
    pl.pp = cfg.par.pp;
    pl.vpp = cfg.par.vpp;
    int layer = 0;
    for (int n : split_layers(cfg)) {
      VirtualStage v;
      v.first_layer = layer;
      v.num_layers = n;
      layer += n;
      pl.stages.push_back(v);
    }
    pl.stages.front().embedding = true;
    pl.stages.back().loss = true;
    pl.stages.back().mtp_layers = cfg.model.mtp_num_layers;
  }
  const int dense = cfg.model.first_k_dense_layers;
  for (VirtualStage& v : pl.stages)
    v.num_dense = std::max(0, std::min(v.first_layer + v.num_layers, dense) - v.first_layer);
  return pl;
}

void check_pipeline_layout(const Config& cfg) {
  (void)pipeline_placement(cfg);
}

}  // namespace epo::model
