#include "run/dump.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "core/packed.h"
#include "run/validate.h"
#include "util/error.h"
#include "util/format.h"
#include "util/npy.h"

namespace flashlab {

namespace fs = std::filesystem;

namespace {

// One look at the directory at `dir`: the index and the listing come from one open directory, so
// another run's swap cannot make them disagree. `swapped` is set when the directory looked at is no
// longer the one at `dir` when the look ends: another run swapped its dump in meanwhile and is
// removing this one, file by file, so what was seen says nothing.
bool looks_like_earlier_dump(const fs::path& dir, bool& swapped) {
  swapped = false;
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    // Gone for a moment: on a file system without the exchange a swap moves the earlier dump
    // aside before it renames the new one in.
    swapped = errno == ENOENT;
    return false;
  }
  std::string text;
  const int ifd = openat(dfd, "index.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (ifd >= 0) {
    char buf[1 << 16];
    for (ssize_t n; (n = read(ifd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    close(ifd);
  }
  DIR* listing = fdopendir(dfd);  // takes dfd
  if (!listing) {
    close(dfd);
    return false;
  }
  const json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  bool ok = ifd >= 0 && index.is_object() && index.contains("schema") &&
            index["schema"] == kDumpSchema && index.contains("files") && index["files"].is_array();
  std::set<std::string> listed = {"index.json"};
  if (ok)
    for (const json& f : index["files"])
      if (f.is_object() && f.contains("file") && f["file"].is_string())
        listed.insert(f["file"].get<std::string>());
  while (ok) {
    const dirent* e = readdir(listing);
    if (!e) break;
    const std::string name = e->d_name;
    if (name == "." || name == ".." || is_write_probe(name)) continue;  // another run's probe
    struct stat st;
    ok = fstatat(dirfd(listing), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         listed.count(name) > 0;
  }
  struct stat seen, now;
  swapped = fstat(dirfd(listing), &seen) != 0 || stat(dir.c_str(), &now) != 0 ||
            seen.st_dev != now.st_dev || seen.st_ino != now.st_ino;
  closedir(listing);
  return ok;
}

}  // namespace

// An earlier dump, looked at again whenever another run swapped its own in during the look (a
// swap replaces one whole dump with another, so a few looks settle), up to a hundred looks.
bool is_earlier_dump(const fs::path& dir) {
  bool swapped = false;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const bool ok = looks_like_earlier_dump(dir, swapped);
    if (!swapped) return ok;
  }
  return false;
}

OutputTarget check_dump_target(const RunConfig& c) {
  OutputTarget t = output_dir("--dump", c.dump_dir, is_earlier_dump);
  const double need = estimate_dump_bytes(c);
  const int64_t free = free_disk_bytes(t.path);
  if (free >= 0 && need > static_cast<double>(free))
    throw UsageError(fmt::format("--dump '{}': the dump needs about {} but the disk has {} free",
                                 c.dump_dir, format_bytes(need),
                                 format_bytes(static_cast<double>(free))));
  return t;
}

void stage_dump(const RunConfig& c, const RunOutcome& r, const OutputTarget& t, OutputSet& files) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  OutputSet::Dir& dir = files.add_dir(t);
  // A packed batch as FA's varlen API holds it: [tokens, heads, d], LSE [H, tokens], and the
  // cumulative offsets of the sequences (cu_seqlens_q.npy, cu_seqlens_k.npy: int32, B + 1 each).
  const std::vector<int64_t> q_shape = s.packed() ? std::vector<int64_t>{s.total_q(), s.H, s.d}
                                                  : std::vector<int64_t>{s.B, s.H, s.Nq, s.d};
  // A paged cache: K, V (and dK, dV) as its pool [pages, Hkv, page_size, d], the block table and
  // each sequence's keys (cache_seqlens.npy, int32 [B]), as FA's paged-cache API takes them.
  const std::vector<int64_t> kv_shape =
      s.packed()  ? std::vector<int64_t>{s.total_k(), s.kv_heads(), s.d}
      : s.paged() ? std::vector<int64_t>{s.num_pages(), s.kv_heads(), s.page_size, s.d}
                  : std::vector<int64_t>{s.B, s.kv_heads(), s.Nk, s.d};
  const std::vector<int64_t> lse_shape =
      s.packed() ? std::vector<int64_t>{s.H, s.total_q()} : std::vector<int64_t>{s.B, s.H, s.Nq};
  const DType lse_type = p.dtype == DType::f64 ? DType::f64 : DType::f32;
  json entries = json::array();
  const auto put = [&](const std::string& name, const std::string& tensor,
                       const std::string& version, const HostTensor& x,
                       const std::vector<int64_t>& shape, DType type) {
    const std::string file = name + ".npy";
    dir.write(file, npy_bytes(x, shape, type));
    entries.push_back({{"file", file},
                       {"tensor", tensor},
                       {"version", version},
                       {"shape", shape},
                       {"descr", npy_descr(type)}});
  };
  if (s.packed()) {
    for (const bool keys : {false, true}) {
      const std::vector<int32_t> cu = cu_seqlens(keys ? s.lens_k : s.lens_q);
      const std::string name = keys ? "cu_seqlens_k" : "cu_seqlens_q";
      dir.write(name + ".npy", npy_int32_bytes(cu));
      entries.push_back({{"file", name + ".npy"},
                         {"tensor", name},
                         {"version", "input"},
                         {"shape", {s.B + 1}},
                         {"descr", "<i4"}});
    }
  }
  if (s.paged()) {
    const auto put_int32 = [&](const std::string& name, const std::vector<int32_t>& values,
                               const std::vector<int64_t>& shape) {
      dir.write(name + ".npy", npy_int32_bytes(values, shape));
      entries.push_back({{"file", name + ".npy"},
                         {"tensor", name},
                         {"version", "input"},
                         {"shape", shape},
                         {"descr", "<i4"}});
    };
    put_int32("block_table", r.inputs.block_table, {s.B, s.pages_per_seq()});
    put_int32("cache_seqlens",
              std::vector<int32_t>(static_cast<size_t>(s.B), static_cast<int32_t>(s.Nk)), {s.B});
  }
  put("Q", "Q", "input", r.inputs.Q, q_shape, p.dtype);
  put("K", "K", "input", r.inputs.K, kv_shape, p.dtype);
  put("V", "V", "input", r.inputs.V, kv_shape, p.dtype);
  put("dO", "dO", "input", r.inputs.dO, q_shape, p.dtype);
  put("reference.O", "O", "reference", r.ref_fwd.O, q_shape, DType::f64);
  put("reference.LSE", "LSE", "reference", r.ref_fwd.LSE, lse_shape, DType::f64);
  if (!r.ref_grads.dQ.empty()) {  // none in a forward-only run (run/config.h)
    put("reference.dQ", "dQ", "reference", r.ref_grads.dQ, q_shape, DType::f64);
    put("reference.dK", "dK", "reference", r.ref_grads.dK, kv_shape, DType::f64);
    put("reference.dV", "dV", "reference", r.ref_grads.dV, kv_shape, DType::f64);
  }
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
  std::string note =
      "bf16 tensors are stored as <f4 (NumPy has no bfloat16); their values are exactly the bf16 "
      "values";
  if (s.paged())
    note +=
        ". K and V are a paged cache [pages, Hkv, page_size, d]: key j of K/V head h of sequence "
        "b is K[block_table[b, j // page_size], h, j % page_size]; in NumPy, "
        "K[block_table].transpose(0, 2, 1, 3, 4).reshape(B, Hkv, -1, d)[:, :, :Nk] is the "
        "contiguous [B, Hkv, Nk, d]. The slots "
        "past a sequence's last key hold NaN (no key); dK and dV are 0 there";
  const json index = {
      {"schema", kDumpSchema}, {"config", config_json(c)}, {"note", note}, {"files", entries}};
  dir.write("index.json", index.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace flashlab
