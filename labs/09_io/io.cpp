// Lab "io" — the lecture's open question (demo 3), measured. The cost lab counts IO the lecture's
// way: every tile read and written is HBM traffic. The lecture itself says that is too simple: the
// Q_i, dO_i and dQ_i tiles that many CTAs read again mostly hit in L2, and only a profiler on a
// real GPU can say how much. This lab puts, for every version, kernel by kernel:
//
//   modeled    the CPU twins' dry-run counters (io_model.h), 2 bytes an element
//   floor      each input read once, each output written once
//   measured   DRAM bytes read and written, L2 traffic and hit rates, tensor-pipe activity and
//              duration, from the hardware counters around each kernel (cuda/counters.h)
//
// at N = 512 ... 16,384, d = 128 and 64 (B*N = 16k tokens, hidden 2048, bf16, not causal), the
// standard/FA ratio both ways (standard = naive forward + backward, FA = tiled + atomic-dq, as in
// the cost lab), the machine's ceilings (cuda/ceilings.h) and, at N = 4096, each kernel on the
// measured roofline (`flashlab plot` draws it). Without a GPU, or without permission to read the
// counters, it prints the modeled half and one line saying why the rest is missing.
//
// io_model.h counts, io_runs.h measures, io_tables.cpp and io_observations.cpp write the report,
// this file puts it together.
#include "io.h"

#include <fmt/format.h>

#include "cuda/ceilings.h"
#include "cuda/counters.h"
#include "cuda/runner.h"
#include "io_model.h"
#include "io_report.h"
#include "io_runs.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"

namespace flashlab::lab {

using namespace io_report;
using namespace io_runs;

Report io_lab(const LabOptions& o, const IoSetup& setup) {
  Report rep;
  rep.command = "lab io";
  const bool gpu = setup.gpu;
  const bool measure = gpu && setup.counters.available && setup.run;
  const std::string where = gpu ? fmt::format("GPU ({})", setup.gpu_name) : backend_note(o, false);

  std::vector<cuda::Ceiling> cs;
  std::string ceilings_error;
  if (gpu && setup.ceilings) {
    try {
      cs = setup.ceilings();
    } catch (const std::exception& e) {
      ceilings_error = e.what();
    }
  }
  std::vector<std::string> left_out;
  const std::vector<PassRun> all = collect(measure ? &setup.run : nullptr, &left_out);
  const std::vector<Ratio> rs = ratios(all);

  rep.config = {{"backend", gpu ? "cuda" : "cpu"},
                {"tokens", io_model::kTokens},
                {"hidden", io_model::kHidden},
                {"N", kNs},
                {"d", kDs},
                {"dtype", "bf16"},
                {"causal", false},
                {"model_blocks", io_model::kBlock},
                {"model_bytes_per_element", io_model::kModelBytesPerElement},
                {"standard", "naive forward + naive backward"},
                {"flashattention", "tiled forward + atomic-dq backward"},
                {"roofline_N", kRooflineN},
                {"seed", o.seed}};
  if (gpu) {
    const cuda::CounterStatus& c = setup.counters;
    rep.config["counters"] = {{"available", c.available},
                              {"why_not", c.why_not},
                              {"library", c.library},
                              {"chip", c.chip},
                              {"metrics", c.metrics},
                              {"missing", c.missing},
                              {"replay_passes", c.replay_passes}};
  }

  rep.tables.push_back(io_table(o, all, where));
  rep.tables.push_back(kernels_table(o, all, where));
  rep.tables.push_back(ratio_table(o, rs));
  if (!cs.empty()) rep.tables.push_back(ceilings_table(o, cs, where));
  if (measure) {
    Table rt = roofline_table(o, all);
    if (!rt.rows.empty()) rep.tables.push_back(std::move(rt));
  }

  model_observations(o, rep, rs, all);
  if (measure) {
    measured_observations(o, rep, rs, all, cs, setup.gpu_name);
  } else {
    const std::string why = gpu ? setup.counters.why_not : setup.why_no_gpu;
    rep.observations.push_back(
        zh(o) ? "没有实测：" + why +
                    "。实测的一半（每个内核的显存和 L2 计数器、本机的上限、roofline）需要一块 "
                    "NVIDIA GPU 和 CUPTI（flashlab lab io --backend cuda）。"
              : "Not measured: " + why +
                    ". The measured half (DRAM and L2 counters per kernel, the machine's ceilings, "
                    "the roofline) needs an NVIDIA GPU with CUPTI (flashlab lab io --backend "
                    "cuda).");
  }
  if (!ceilings_error.empty())
    rep.observations.push_back(zh(o) ? "上限没有测到：" + ceilings_error
                                     : "The ceilings were not measured: " + ceilings_error);
  for (const std::string& l : left_out)
    rep.observations.push_back(zh(o) ? "未计入（还没写完）：" + l
                                     : "Left out (not finished): " + l);
  return rep;
}

Report io(const LabOptions& o) {
  IoSetup s;
  s.gpu = use_gpu(o);
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (s.gpu) {
    s.gpu_name = dev.name;
    s.counters = cuda::counter_status();
    s.ceilings = cuda::measure_ceilings;
    s.run = io_runs::gpu_runner(o.seed);
  } else {
    s.why_no_gpu = dev.present ? "--backend cpu was asked for" : dev.why_absent;
  }
  return io_lab(o, s);
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "io",
    .title_en =
        "The lecture's open question, measured: HBM traffic, L2 hits and the roofline, kernel "
        "by kernel",
    .title_zh = "讲义留下的问题，实测：显存流量、L2 命中与 roofline，逐个内核",
    .run = flashlab::lab::io,
    .tables = {"io", "kernels", "ratio", "ceilings", "roofline"},
});
