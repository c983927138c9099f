#include "run/config.h"

#include <algorithm>

#include "core/packed.h"

namespace flashlab {

std::string to_string(Backend b) {
  return b == Backend::cuda ? "cuda" : "cpu";
}

bool forward_only_reference(const RunConfig& c) {
  if (c.problem.dtype == DType::f64) return false;
  return std::all_of(c.versions.begin(), c.versions.end(),
                     [](const VersionInfo* v) { return v->pass == Pass::fwd; });
}

double fwd_flops(const Problem& p) {
  const Shape& s = p.shape;
  if (s.packed()) {  // counted sequence by sequence: a packed batch pays for no padding
    double f = 0;
    for_each_sequence(p, [&](const Sequence& q) { f += fwd_flops(q.problem); });
    return f;
  }
  if (p.windowed()) {
    // A window: 4 d FLOPs for every (row, key) pair a row sees, counted row by row.
    double pairs = 0;
    for (int64_t r = 0; r < s.Nq; ++r)
      pairs += static_cast<double>(std::max<int64_t>(0, p.last_key(r) - p.first_key(r) + 1));
    return 4.0 * s.B * s.H * pairs * s.d;
  }
  const double f = 4.0 * s.B * s.H * static_cast<double>(s.Nq) * s.Nk * s.d;
  return p.causal ? f / 2 : f;
}

json config_json(const RunConfig& c) {
  const Problem& p = c.problem;
  json versions = json::array();
  for (const VersionInfo* v : c.versions) versions.push_back(v->id);
  json j = {{"backend", to_string(c.backend)},
            {"versions", versions},
            {"dtype", to_string(p.dtype)},
            {"B", p.shape.B},
            {"H", p.shape.H},
            {"Hkv", p.shape.kv_heads()},
            {"Nq", p.shape.Nq},
            {"Nk", p.shape.Nk},
            {"d", p.shape.d},
            {"causal", p.causal},
            {"window", {p.window_left, p.window_right}},
            {"scale", p.softmax_scale()},
            {"seed", c.seed},
            {"inputs", to_string(c.inputs)},
            {"repeats", c.repeats},
            {"warmup", c.warmup},
            {"bitwise_repeats", c.bitwise_repeats}};
  if (c.backend == Backend::cpu) {
    j["br"] = c.cpu.Br;
    j["bc"] = c.cpu.Bc;
    j["threads"] = c.cpu.threads;
  }
  if (p.shape.packed()) {
    j["seqlens_q"] = p.shape.lens_q;
    j["seqlens_k"] = p.shape.lens_k;
  }
  if (p.shape.paged()) j["page_size"] = p.shape.page_size;
  if (c.cpu.splits > 0) j["splits"] = c.cpu.splits;
  if (c.cpu.ranks > 0) j["ranks"] = c.cpu.ranks;
  if (!c.dump_dir.empty()) j["dump"] = c.dump_dir;
  j["check"] = c.sample_check ? "sample" : "full";
  return j;
}

}  // namespace flashlab
