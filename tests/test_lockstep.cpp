// The lockstep of exercise 2's CPU twin (kernels/common/cpu/lockstep.h): workers of a round that
// add into the same elements with atomic_add lose nothing, and really run at the same time; the
// same adds written as a plain += lose all but one partial per element and round, every time and
// on any number of threads; a worker alone on its elements is right either way; an element out of
// range is one clear error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu/lockstep.h"
#include "core/rng.h"

namespace flashlab {
namespace {

using cpu::DQAccumulator;
using cpu::run_in_lockstep;

// partial[w][i][e]: what worker w adds into element e in round i, normal random numbers.
using Partials = std::vector<std::vector<std::vector<double>>>;

Partials random_partials(uint64_t seed, int W, int rounds, int n) {
  Rng rng(seed);
  Partials p(W, std::vector<std::vector<double>>(rounds, std::vector<double>(n)));
  for (auto& worker : p)
    for (auto& round : worker)
      for (double& x : round) x = rng.normal();
  return p;
}

// Every worker adds its partial of the round into every element, atomically or with a plain +=.
struct Adder {
  const Partials* partials;
  int w;
  bool atomic;
  void visit(int64_t i, DQAccumulator<double>::Worker acc) const {
    const std::vector<double>& mine = (*partials)[w][i];
    for (size_t e = 0; e < mine.size(); ++e) {
      if (atomic)
        acc.atomic_add(static_cast<int64_t>(e), mine[e]);
      else
        acc[static_cast<int64_t>(e)] += mine[e];
    }
  }
};

std::vector<double> run_adders(const Partials& p, bool atomic, int threads) {
  const int W = static_cast<int>(p.size()), rounds = static_cast<int>(p[0].size());
  const int n = static_cast<int>(p[0][0].size());
  DQAccumulator<double> acc(n, W);
  std::vector<Adder> workers;
  for (int w = 0; w < W; ++w) workers.push_back({&p, w, atomic});
  run_in_lockstep(workers, rounds, acc, threads);
  return acc.values();
}

TEST(Lockstep, AtomicAddsOfARoundLoseNothing) {
  for (int threads : {1, 2, 4}) {
    const Partials p = random_partials(101 + threads, 6, 5, 96);
    const std::vector<double> got = run_adders(p, true, threads);
    for (size_t e = 0; e < got.size(); ++e) {
      double sum = 0, size = 0;
      for (const auto& worker : p)
        for (const auto& round : worker) sum += round[e], size += std::abs(round[e]);
      EXPECT_NEAR(got[e], sum, 1e-13 * size) << "element " << e << ", " << threads << " threads";
    }
  }
}

// A plain += of 3 workers over 3 rounds: each element ends as the sum, over the rounds, of one
// worker's partial (the last write of the round to land), never as the sum of all of them.
TEST(Lockstep, PlainAddsOfARoundLoseAllButOne) {
  constexpr int W = 3, R = 3;
  for (int threads : {1, 2}) {
    const Partials p = random_partials(202 + threads, W, R, 80);
    const std::vector<double> got = run_adders(p, false, threads);
    for (size_t e = 0; e < got.size(); ++e) {
      bool one_per_round = false;
      for (int pick = 0; pick < W * W * W && !one_per_round; ++pick) {
        double sum = 0;
        for (int i = 0, k = pick; i < R; ++i, k /= W) sum += p[k % W][i][e];
        one_per_round = sum == got[e];
      }
      EXPECT_TRUE(one_per_round) << "element " << e << " = " << got[e] << ", " << threads
                                 << " threads";
      double all = 0;
      for (const auto& worker : p)
        for (const auto& round : worker) all += round[e];
      EXPECT_GT(std::abs(got[e] - all), 1e-9) << "element " << e << ": no update was lost";
    }
  }
}

// One worker alone: its plain += sees its own writes of the round (many adds into one element in
// one visit), so it sums exactly as a sequential loop does.
TEST(Lockstep, AWorkerAloneIsRightWithAPlainAdd) {
  const Partials p = random_partials(303, 1, 4, 50);
  struct Folder {
    const Partials* p;
    void visit(int64_t i, DQAccumulator<double>::Worker acc) const {
      for (double x : (*p)[0][i]) acc[7] += x;  // every partial of the round into element 7
      acc[3] = acc[7];                          // a copy of a held write is a read and a write
    }
  };
  DQAccumulator<double> acc(10, 1);
  std::vector<Folder> one = {{&p}};
  run_in_lockstep(one, 4, acc, 2);
  double expect = 0;
  for (const auto& round : p[0])
    for (double x : round) expect += x;
  EXPECT_EQ(acc.values()[7], expect);
  EXPECT_EQ(acc.values()[3], expect);
  EXPECT_EQ(acc.values()[0], 0.0);
}

// With two threads, the two visits of a round are in flight together: each waits (up to 20 s)
// for the other to arrive before it adds, which a serial schedule would never let happen.
TEST(Lockstep, VisitsOfARoundRunAtTheSameTime) {
  struct Meeter {
    std::atomic<int>* arrived;
    std::atomic<int>* met;
    double x;
    void visit(int64_t, DQAccumulator<double>::Worker acc) const {
      arrived->fetch_add(1);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (arrived->load() < 2 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
      if (arrived->load() == 2) met->fetch_add(1);
      acc.atomic_add(0, x);
    }
  };
  std::atomic<int> arrived{0}, met{0};
  Rng rng(404);
  const double a = rng.normal(), b = rng.normal();
  std::vector<Meeter> two = {{&arrived, &met, a}, {&arrived, &met, b}};
  DQAccumulator<double> acc(1, 2);
  run_in_lockstep(two, 1, acc, 2);
  EXPECT_EQ(met.load(), 2);
  EXPECT_EQ(acc.values()[0], a + b);  // two adds into 0: either order gives the same bits
}

TEST(Lockstep, AnElementOutOfRangeIsOneClearError) {
  struct Stray {
    int64_t e;
    bool atomic;
    void visit(int64_t, DQAccumulator<double>::Worker acc) const {
      if (atomic)
        acc.atomic_add(e, 0.5);
      else
        acc[e] += 0.5;
    }
  };
  for (bool atomic : {true, false})
    for (int64_t e : {int64_t{12}, int64_t{-1}}) {
      DQAccumulator<double> acc(12, 3);
      std::vector<Stray> workers = {{2, atomic}, {e, atomic}, {5, atomic}};
      try {
        run_in_lockstep(workers, 2, acc, 2);
        ADD_FAILURE() << "element " << e << " was accepted";
      } catch (const std::out_of_range& x) {
        EXPECT_EQ(std::string(x.what()),
                  "dQaccum has no element " + std::to_string(e) + " (it has 12)");
      }
    }
}

}  // namespace
}  // namespace flashlab
