#include "run/dump.h"

#include <fmt/format.h>

#include <filesystem>

#include "run/validate.h"
#include "util/error.h"
#include "util/files.h"
#include "util/format.h"
#include "util/npy.h"

namespace flashlab {

void check_dump_target(const RunConfig& c) {
  check_output_dir(c.dump_dir);
  const double need = estimate_dump_bytes(c);
  const int64_t free = free_disk_bytes(c.dump_dir);
  if (free >= 0 && need > static_cast<double>(free))
    throw UsageError(fmt::format("--dump '{}': the dump needs about {} but the disk has {} free",
                                 c.dump_dir, format_bytes(need),
                                 format_bytes(static_cast<double>(free))));
}

void write_dump(const RunConfig& c, const RunOutcome& r) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  make_dirs(c.dump_dir);
  const std::vector<int64_t> q_shape{s.B, s.H, s.Nq, s.d}, kv_shape{s.B, s.H, s.Nk, s.d};
  const std::vector<int64_t> lse_shape{s.B, s.H, s.Nq};
  const DType lse_type = p.dtype == DType::f64 ? DType::f64 : DType::f32;
  json files = json::array();
  const auto put = [&](const std::string& name, const std::string& tensor,
                       const std::string& version, const HostTensor& x,
                       const std::vector<int64_t>& shape, DType t) {
    const std::string file = name + ".npy";
    write_file_atomic((std::filesystem::path(c.dump_dir) / file).string(), npy_bytes(x, shape, t));
    files.push_back({{"file", file},
                     {"tensor", tensor},
                     {"version", version},
                     {"shape", shape},
                     {"descr", npy_descr(t)}});
  };
  put("Q", "Q", "input", r.inputs.Q, q_shape, p.dtype);
  put("K", "K", "input", r.inputs.K, kv_shape, p.dtype);
  put("V", "V", "input", r.inputs.V, kv_shape, p.dtype);
  put("dO", "dO", "input", r.inputs.dO, q_shape, p.dtype);
  put("reference.O", "O", "reference", r.ref_fwd.O, q_shape, DType::f64);
  put("reference.LSE", "LSE", "reference", r.ref_fwd.LSE, lse_shape, DType::f64);
  put("reference.dQ", "dQ", "reference", r.ref_grads.dQ, q_shape, DType::f64);
  put("reference.dK", "dK", "reference", r.ref_grads.dK, kv_shape, DType::f64);
  put("reference.dV", "dV", "reference", r.ref_grads.dV, kv_shape, DType::f64);
  for (const VersionOutcome& v : r.versions) {
    const std::string id = v.version->id;
    if (v.has_fwd) {
      put(id + ".O", "O", id, v.fwd.O, q_shape, p.dtype);
      put(id + ".LSE", "LSE", id, v.fwd.LSE, lse_shape, lse_type);
    }
    if (v.has_bwd) {
      put(id + ".dQ", "dQ", id, v.grads.dQ, q_shape, p.dtype);
      put(id + ".dK", "dK", id, v.grads.dK, kv_shape, p.dtype);
      put(id + ".dV", "dV", id, v.grads.dV, kv_shape, p.dtype);
    }
  }
  const json index = {{"schema", "flashlab.dump/v1"},
                      {"config", config_json(c)},
                      {"note",
                       "bf16 tensors are stored as <f4 (NumPy has no bfloat16); their "
                       "values are exactly the bf16 values"},
                      {"files", files}};
  write_file_atomic((std::filesystem::path(c.dump_dir) / "index.json").string(),
                    index.dump(2) + "\n");
}

}  // namespace flashlab
