#include "io_runs.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "core/rng.h"
#include "cuda/runner.h"
#include "run/registry.h"
#include "util/error.h"
#include "util/format.h"

namespace flashlab::lab::io_runs {

using io_model::model_bytes;
using io_model::PassModel;

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  return a && b && *b > 0 ? std::optional<double>(*a / *b) : std::nullopt;
}

std::optional<double> sm_read_hit_pct(const Kernel& k) {
  const auto r = k.get("l2_sm_read_sectors"), h = k.get("l2_sm_read_hit_sectors");
  return r && h && *r > 0 ? std::optional<double>(100 * *h / *r) : std::nullopt;
}

namespace {

// Names each measured kernel, numbering repeats, and pairs it with its modeled count. When the
// launches could not be named but there are as many as the model has kernels, the model's names
// are taken in launch order (the note of the pass says the names are unknown).
std::vector<Kernel> kernels_of(const cuda::PassCounters& pc, const PassModel& m) {
  std::vector<std::string> names;
  for (size_t i = 0; i < pc.kernels.size(); ++i)
    names.push_back(!pc.named && pc.kernels.size() == m.kernels.size() ? m.kernels[i].kernel
                                                                       : pc.kernels[i].name);
  std::map<std::string, int> seen, total;
  for (const std::string& n : names) ++total[n];
  std::vector<bool> used(m.kernels.size(), false);
  std::vector<Kernel> out;
  for (size_t j = 0; j < pc.kernels.size(); ++j) {
    const cuda::KernelCounters& k = pc.kernels[j];
    const std::string& name = names[j];
    Kernel x;
    x.name = total[name] > 1 ? fmt::format("{} #{}", name, ++seen[name]) : name;
    x.v = k.values;
    for (size_t i = 0; i < m.kernels.size(); ++i)
      if (!used[i] && m.kernels[i].kernel == name) {
        used[i] = true;
        x.model = m.kernels[i].counts;
        break;
      }
    out.push_back(std::move(x));
  }
  return out;
}

// The ladder's versions (not the exercises, which a student is still writing; not the FP8 rung,
// whose bf16 inputs and e4m3 copies lab fp8 measures) in an order that runs the tiled forward
// before any backward-only version.
std::vector<const VersionInfo*> run_order() {
  std::vector<const VersionInfo*> order;
  for (const VersionInfo& v : versions())
    if (!v.exercise && !v.fp8 && v.pass != Pass::bwd) order.push_back(&v);
  for (const VersionInfo& v : versions())
    if (!v.exercise && !v.fp8 && v.pass == Pass::bwd) order.push_back(&v);
  return order;
}

bool logging() {
  const char* v = std::getenv("FLASHLAB_IO_LOG");
  return v && *v && std::string(v) != "0";
}

// Runs one version with counters and fills its pass runs; the reason goes into why_not when the
// version cannot run here.
void measure_version(const RunWithCounters& run, const VersionInfo& v, const Problem& p,
                     const Forward* tiled, std::vector<PassRun*> runs, Forward* keep_fwd) {
  auto fail = [&](const std::string& why) {
    for (PassRun* r : runs) r->why_not = why;
  };
  if (v.pass == Pass::bwd && !tiled) return fail("no tiled forward to take O and LSE from");
  const auto t0 = std::chrono::steady_clock::now();
  try {
    cuda::RunResult res = run(v, p, v.pass == Pass::bwd ? tiled : nullptr);
    for (PassRun* r : runs) {
      const cuda::PassCounters& pc = r->backward ? res.bwd_counters : res.fwd_counters;
      r->kernels = kernels_of(pc, r->model);
      r->measured = !r->kernels.empty();
      r->replays = pc.replay_passes;
      r->note = pc.note;
    }
    if (keep_fwd) *keep_fwd = std::move(res.fwd);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (logging())
    std::fprintf(stderr, "lab io: %s d=%lld N=%lld: %.1f s%s%s\n", v.id,
                 static_cast<long long>(p.shape.d), static_cast<long long>(p.shape.Nq),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 runs.front()->why_not.empty() ? "" : " -- ", runs.front()->why_not.c_str());
}

PassRun pass_run(const VersionInfo& v, bool backward, const Problem& p) {
  PassRun r{&v, backward, p, io_model::model_pass(v, backward, p), false, {}, {}, 0, {}};
  return r;
}

}  // namespace

RunWithCounters gpu_runner(uint64_t seed) {
  auto inputs = std::make_shared<std::pair<int64_t, Inputs>>(0, Inputs{});
  return [seed, inputs](const VersionInfo& v, const Problem& p, const Forward* tiled) {
    if (!v.cuda) throw std::runtime_error("no CUDA implementation in this build");
    if (v.cuda->check) {
      const std::string why = v.cuda->check(p);
      if (!why.empty()) throw std::runtime_error(why);
    }
    const int64_t need = cuda::required_device_bytes(*v.cuda, p, {});
    if (need > cuda::device_info().free_bytes)
      throw std::runtime_error(
          fmt::format("needs {} of device memory", format_bytes(static_cast<double>(need))));
    // B*N*H*d is the same at every N of the sweep: one set of inputs per head dim.
    if (inputs->first != p.shape.d) *inputs = {p.shape.d, make_inputs(p, seed)};
    return cuda::run(*v.cuda, p, inputs->second, tiled, cuda::counters_only());
  };
}

std::vector<PassRun> collect(const RunWithCounters* run, std::vector<std::string>* left_out) {
  std::vector<PassRun> all;
  std::vector<const VersionInfo*> order;
  for (const VersionInfo* v : run_order()) {
    // The model walks the version's schedule (a dry run): a starter stops at its first step.
    try {
      const Problem p = io_model::problem(kNs[0], kDs[0]);
      for (bool bwd : {false, true})
        if (bwd ? v->cpu_backward != nullptr : v->cpu_forward != nullptr) pass_run(*v, bwd, p);
      order.push_back(v);
    } catch (const NotImplemented& e) {
      if (left_out) left_out->push_back(fmt::format("{}: {}", v->id, e.what()));
    }
  }
  for (int64_t d : kDs)
    for (int64_t N : kNs) {
      const Problem p = io_model::problem(N, d);
      const size_t first = all.size();
      for (const VersionInfo* v : order)
        for (bool bwd : {false, true})
          if (bwd ? v->cpu_backward != nullptr : v->cpu_forward != nullptr)
            all.push_back(pass_run(*v, bwd, p));
      if (!run) continue;
      Forward tiled;
      bool have_tiled = false;
      for (const VersionInfo* v : order) {
        std::vector<PassRun*> runs;
        for (size_t i = first; i < all.size(); ++i)
          if (all[i].version == v) runs.push_back(&all[i]);
        if (runs.empty()) continue;
        const bool is_tiled = std::string(v->id) == "tiled";
        measure_version(*run, *v, p, have_tiled ? &tiled : nullptr, runs,
                        is_tiled ? &tiled : nullptr);
        have_tiled = have_tiled || (is_tiled && runs.front()->measured);
      }
    }
  return all;
}

const PassRun* find(const std::vector<PassRun>& all, const char* id, bool bwd, int64_t d,
                    int64_t N) {
  for (const PassRun& r : all)
    if (r.version->id == std::string(id) && r.backward == bwd && r.p.shape.d == d &&
        r.p.shape.Nq == N)
      return &r;
  return nullptr;
}

const Kernel* find_kernel(const PassRun* r, const char* name) {
  if (!r) return nullptr;
  for (const Kernel& k : r->kernels)
    if (k.name == name) return &k;
  return nullptr;
}

namespace {

std::optional<double> add(std::optional<double> a, std::optional<double> b) {
  return a && b ? std::optional<double>(*a + *b) : std::nullopt;
}

std::optional<double> l2_bytes(const PassRun* r) {
  return r && r->measured ? std::optional<double>(r->sum("l2_bytes")) : std::nullopt;
}

}  // namespace

std::vector<Ratio> ratios(const std::vector<PassRun>& all) {
  std::vector<Ratio> out;
  for (int64_t d : kDs)
    for (int64_t N : kNs) {
      const PassRun *sf = find(all, "naive", false, d, N), *sb = find(all, "naive", true, d, N);
      const PassRun *ff = find(all, "tiled", false, d, N), *fb = find(all, "atomic-dq", true, d, N);
      if (!sf || !sb || !ff || !fb) continue;
      Ratio r;
      r.d = d, r.N = N;
      r.std_model = model_bytes(sf->model.total) + model_bytes(sb->model.total);
      r.fa_model = model_bytes(ff->model.total) + model_bytes(fb->model.total);
      r.std_dram = add(sf->dram(), sb->dram());
      r.fa_dram = add(ff->dram(), fb->dram());
      r.std_l2 = add(l2_bytes(sf), l2_bytes(sb));
      r.fa_l2 = add(l2_bytes(ff), l2_bytes(fb));
      out.push_back(r);
    }
  return out;
}

}  // namespace flashlab::lab::io_runs
