#include "run/config.h"

namespace flashlab {

std::string to_string(Backend b) {
  return b == Backend::cuda ? "cuda" : "cpu";
}

double fwd_flops(const Problem& p) {
  const Shape& s = p.shape;
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
            {"repeats", c.repeats},
            {"warmup", c.warmup}};
  if (c.backend == Backend::cpu) {
    j["br"] = c.cpu.Br;
    j["bc"] = c.cpu.Bc;
    j["threads"] = c.cpu.threads;
  }
  if (!c.dump_dir.empty()) j["dump"] = c.dump_dir;
  return j;
}

}  // namespace flashlab
