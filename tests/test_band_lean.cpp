// The band as two kernels keep it in few registers, held to Band (kernels/common/band.h) and to the
// row-by-row definition of core/problem.h, as test_band.cpp holds Band itself:
//
//   - tiled's forward keeps the band relative to its first K tile (u0, nk_rel) and masks a warp's
//     tile from them;
//   - hopper-deterministic's dQ writer finds Q block i's first K block by a shift.
//
// Neither kernel calls a host function for this (both were written out for registers), so each
// lean form is repeated here, line for line, with the kernel line it mirrors named beside it: a
// change to one of those lines is made here too, and this test says whether it still describes
// the band. Shapes, windows and the causal mask are drawn from a seed, dense and packed (the band
// of a sequence is seq_band's, common/packed.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../kernels/common/band.h"
#include "../kernels/common/fa2_bwd/blocks.h"
#include "../kernels/common/packed.h"
#include "core/packed.h"

namespace flashlab {
namespace {

using cuda::Band;
using cuda::band_of;
using cuda::BlockRange;
using cuda::MaskKind;

// Whether real row r of `one` (a dense problem) sees key k, by the definition.
bool sees(const Problem& one, int r, int k) {
  return k >= 0 && k < one.shape.Nk && k >= one.first_key(r) && k <= one.last_key(r);
}

// One warp's tile of tiled's forward: whether it takes the mask at all, and which of its elements
// the mask sets to -inf ([row in the warp][key in the tile]).
struct WarpTile {
  bool masked = false;
  std::vector<int> hidden;  // -1 until a lane's element covers it, then 0 or 1
};

// kernels/02_tiled/fwd_kernel.cuh, fwd_body, for the warp whose rows start at q0 + warp_row0 and
// its tile j (counted from kv0), in a kernel built for kMask, Br x Bc tiles, kRowsPerWarp rows a
// warp. The lines are the kernel's: kBanded, kLeft and MT, NS from its constants; kr, kv0, nk_rel
// and u0 before its loop over the tiles; u, ragged, masked, then key_end, t and the -inf test of
// each lane's elements in it.
WarpTile tiled_warp_tile(const Band& band, MaskKind kMask, int Nk, int q0, int warp_row0, int j,
                         int Br, int Bc, int kRowsPerWarp) {
  const bool kBanded = kMask != MaskKind::none, kLeft = kMask == MaskKind::both;
  const int MT = kRowsPerWarp / 16, NS = Bc / 8;
  const BlockRange kr =
      kBanded ? band.k_blocks(q0 / Br, Br, Bc) : BlockRange{0, (Nk + Bc - 1) / Bc};
  const int kv0 = kr.begin;
  const int nk_rel = Nk - kv0 * Bc;
  const int u0 = kv0 * Bc - (q0 + warp_row0) - band.offset;
  const int u = u0 + j * Bc;
  const bool ragged = j * Bc + Bc > nk_rel;
  const bool masked = ragged || (kBanded && u + Bc - 1 > band.right) ||
                      (kLeft && u - (kRowsPerWarp - 1) < -band.left);
  WarpTile w;
  w.masked = masked;
  w.hidden.assign(static_cast<size_t>(kRowsPerWarp) * Bc, -1);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, qd = lane % 4;
    const int key_end = nk_rel - j * Bc - 2 * qd;
    const int t = u + 2 * qd - g;
    for (int mt = 0; mt < MT; ++mt)
      for (int n = 0; n < NS; ++n)
        for (int e = 0; e < 4; ++e) {
          const int r = mt * 16 + (e >> 1) * 8, c = n * 8 + (e & 1);
          const bool hide = c >= key_end || (kBanded && t + c - r > band.right) ||
                            (kLeft && t + c - r < -band.left);
          // The lane's accumulator s[mt][n][e] is row g + r of the warp, key 2 qd + c of the tile
          // (mma.sync m16n8's C fragment).
          int& at = w.hidden[static_cast<size_t>(g + r) * Bc + 2 * qd + c];
          EXPECT_EQ(at, -1) << "two lanes hold one element";
          at = hide ? 1 : 0;
        }
  }
  return w;
}

// kernels/06_hopper/bwd_dq_writer.cuh, write_dq: K block j (of Bc = 128 keys) is the first of its
// dQ split to write Q block i when j - S is below this, the band's first K block for Q block i:
// the line `first = j - S < max(0, (i * Br + offset - left) >> 7)`, offset and left the band's.
int hopper_first_k_block(const Band& band, int i, int Br) {
  return std::max(0, (i * Br + band.offset - band.left) >> 7);
}

// Every warp, every tile tiled visits for every Q block of `one` (a dense problem, or one sequence
// of a packed batch, whose band is `band`), against the definition: a tile without the mask has
// every key seen by every real row of the warp; a masked tile hides exactly the keys a real row
// does not see. (Rows past Nq are computed on zero-filled Q and never stored.)
void check_tiled(const Problem& one, const Band& band, MaskKind kind, int Br, int Bc,
                 int kRowsPerWarp) {
  const int Nq = static_cast<int>(one.shape.Nq), Nk = static_cast<int>(one.shape.Nk);
  const bool kBanded = kind != MaskKind::none;
  for (int q0 = 0; q0 < Nq; q0 += Br) {
    const BlockRange kr =
        kBanded ? band.k_blocks(q0 / Br, Br, Bc) : BlockRange{0, (Nk + Bc - 1) / Bc};
    for (int warp_row0 = 0; warp_row0 < Br; warp_row0 += kRowsPerWarp)
      for (int j = 0; j < kr.count(); ++j) {
        const WarpTile w = tiled_warp_tile(band, kind, Nk, q0, warp_row0, j, Br, Bc, kRowsPerWarp);
        const int k0 = (kr.begin + j) * Bc;
        for (int r = 0; r < kRowsPerWarp && q0 + warp_row0 + r < Nq; ++r)
          for (int c = 0; c < Bc; ++c) {
            const int row = q0 + warp_row0 + r, key = k0 + c;
            const int hidden = w.hidden[static_cast<size_t>(r) * Bc + c];
            ASSERT_NE(hidden, -1) << "no lane holds row " << r << ", key " << c;
            if (!w.masked) {
              ASSERT_TRUE(sees(one, row, key))
                  << "row " << row << " does not see key " << key << ", and the tile is unmasked";
            } else {
              ASSERT_EQ(hidden == 1, !sees(one, row, key)) << "row " << row << ", key " << key;
            }
          }
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
}

// Every Q block of `one`: the shift gives Band's first K block, and for every K block j that meets
// the Q block (by the definition, padding rows included as test_band.cpp counts them) and every
// split count S, "first" holds exactly when K block j - S does not meet it.
void check_hopper_writer(const Problem& one, const Band& band, int Br) {
  constexpr int Bc = cuda::kOuterKBc;
  static_assert(Bc == 128, "write_dq's shift is a division by 128");
  const int Nq = static_cast<int>(one.shape.Nq), Nk = static_cast<int>(one.shape.Nk);
  const int m_end = (Nq + Br - 1) / Br, n_end = (Nk + Bc - 1) / Bc;
  std::vector<char> meet(static_cast<size_t>(m_end) * n_end, 0);
  for (int r = 0; r < m_end * Br; ++r)
    for (int k = 0; k < Nk; ++k)
      if (r < Nq ? sees(one, r, k) : band.sees(r, k)) meet[(r / Br) * n_end + k / Bc] = 1;
  const auto meets = [&](int i, int j) { return j >= 0 && j < n_end && meet[i * n_end + j]; };
  for (int i = 0; i < m_end; ++i) {
    const int lean = hopper_first_k_block(band, i, Br);
    ASSERT_EQ(lean, band.k_blocks(i, Br, Bc).begin) << "Q block " << i;
    for (int j = 0; j < n_end; ++j) {
      if (!meets(i, j)) continue;
      for (int S = 1; S <= 8; ++S)
        ASSERT_EQ(j - S < lean, !meets(i, j - S))
            << "Q block " << i << ", K block " << j << ", " << S << " splits";
    }
  }
}

// A length: half the time one at a block edge (1, 63, 64, 65, 128, 129), else any in 1..300; a
// side of a window: none, 0, or any in 0..400 (past the keys included).
Problem draw_problem(std::mt19937& rng, bool packed) {
  const int64_t edges[] = {1, 63, 64, 65, 128, 129};
  const auto length = [&] {
    return rng() % 2 ? edges[rng() % std::size(edges)] : 1 + static_cast<int64_t>(rng() % 300);
  };
  const auto side = [&]() -> int64_t {
    const unsigned k = rng() % 4;
    return k == 0 ? -1 : k == 1 ? 0 : static_cast<int64_t>(rng() % 401);
  };
  Problem p;
  p.shape.H = 1;
  p.shape.d = 64;
  if (packed) {
    std::vector<int64_t> lq(1 + rng() % 4), lk(lq.size());
    for (size_t b = 0; b < lq.size(); ++b) {
      lq[b] = rng() % 5 == 0 ? 0 : length();
      lk[b] = rng() % 5 == 0 ? 0 : length();
    }
    set_packed(p.shape, lq, lk);
  } else {
    p.shape.Nq = length();
    p.shape.Nk = length();
  }
  p.causal = rng() % 2;
  p.window_left = side();
  p.window_right = side();
  return p;
}

// The dense problem of each sequence and the band a kernel gives it: band_of() for a dense
// problem, seq_band() of the batch's band for a sequence (common/packed.h).
template <class Fn>
void for_each_band(const Problem& p, Fn&& fn) {
  if (!p.shape.packed()) return fn(p, band_of(p));
  const Band batch = band_of(p);
  for_each_sequence(p, [&](const Sequence& q) {
    fn(q.problem, cuda::seq_band(batch, static_cast<int>(q.len_q()), static_cast<int>(q.len_k())));
  });
}

std::string describe(const Problem& p) {
  std::string s = p.shape.packed() ? "packed" : "dense";
  if (p.shape.packed())
    for (size_t b = 0; b < p.shape.lens_q.size(); ++b)
      s += fmt::format(" {}x{}", p.shape.lens_q[b], p.shape.lens_k[b]);
  else
    s += fmt::format(" {}x{}", p.shape.Nq, p.shape.Nk);
  return s + fmt::format("{} window ({}, {})", p.causal ? " causal" : "", p.window_left,
                         p.window_right);
}

TEST(Band, TiledMaskFromItsFirstTileIsTheBand) {
  // (Br, Bc, rows a warp): tiled's FwdTraits (128, 64, 4 warps) at both head dims, then others
  // that fwd_body's static_asserts allow.
  const int shapes[][3] = {{128, 64, 32}, {64, 64, 16}, {128, 32, 64}, {64, 128, 32}};
  std::mt19937 rng(77031);
  int checked = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Problem p = draw_problem(rng, trial % 3 == 2);
    const int* t = trial < 300 ? shapes[0] : shapes[rng() % std::size(shapes)];
    SCOPED_TRACE(fmt::format("{}, Br {} Bc {} rows/warp {}", describe(p), t[0], t[1], t[2]));
    for_each_band(p, [&](const Problem& one, const Band& band) {
      // The kernel tiled launches (both sides for every band and every packed batch, none for
      // dense attention), and the narrowest kind the band allows.
      const MaskKind launched =
          p.causal || p.windowed() || p.shape.packed() ? MaskKind::both : MaskKind::none;
      for (const MaskKind kind : {launched, cuda::mask_kind_of(p)}) {
        check_tiled(one, band, kind, t[0], t[1], t[2]);
        if (HasFatalFailure()) return;
      }
    });
    if (HasFatalFailure()) return;
    ++checked;
  }
  EXPECT_EQ(checked, 600);
}

TEST(Band, HopperDqWriterFindsTheFirstKBlockByAShift) {
  std::mt19937 rng(51123);
  int checked = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Problem p = draw_problem(rng, trial % 3 == 2);
    for (const int64_t d : {64, 128}) {
      const int Br = cuda::outer_k_br(static_cast<int>(d));
      SCOPED_TRACE(fmt::format("{}, Br {}", describe(p), Br));
      for_each_band(
          p, [&](const Problem& one, const Band& band) { check_hopper_writer(one, band, Br); });
      if (HasFatalFailure()) return;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 600);
}

}  // namespace
}  // namespace flashlab
