// K-block workers in lockstep, and the dQ accumulator they add into (exercise 2's CPU twin).
//
// On the GPU the thread blocks of FA2's outer-K kernel walk the Q blocks in the same order at
// about the same pace: the blocks of a head reach Q block i together, and add their dQ_i partials
// into the same rows of dQaccum at the same time. That is why step 7 is an atomic add. CPU threads
// that pick workers freely almost never meet on the same rows at the same moment, so a plain `+=`
// there passes every check while the kernel it stands for loses updates. Here the workers of a
// head run in rounds instead, one round per Q block:
//
//   round i   every worker j whose K block Q block i sees handles the pair (i, j); the round's
//             workers are spread over the threads, so their atomic adds really race
//   barrier   the round's plain stores land
//
//   worker j    reads dQaccum[e] = v  ...  stores v + partial_j    (held to the barrier)
//   worker j'   reads dQaccum[e] = v  ...  stores v + partial_j'   (held to the barrier)
//   barrier     dQaccum[e] = v + partial_j or v + partial_j': one partial is lost
//
// The accumulator gives a worker two ways in. atomic_add(e, x) is std::atomic_ref's fetch_add,
// as atomicAdd is on the GPU: it lands at once, no add is ever lost, and only the order of the
// adds, so dQ's last bits, changes from run to run. A plain element, acc[e], can be read and
// written, and acc[e] += x is a read and then a write, not one step. Its write is held until the
// round ends, so every worker of the round has read the value from before it: of the orders a
// real race allows (read, read, write, write), the one that loses the most, every time and with
// any number of threads. A worker reads its own held writes, so a worker alone on its rows, as on
// a problem with one K block, is right with a plain `+=`: only a race loses updates.
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace flashlab::cpu {

template <class T>
class DQAccumulator {
 public:
  // n elements, all 0, shared by `workers` workers of one round.
  DQAccumulator(int64_t n, int64_t workers)
      : values_(static_cast<size_t>(n), T(0)), held_(static_cast<size_t>(workers)) {}

  class Element;

  // What one worker sees of the accumulator.
  class Worker {
   public:
    // dQaccum[e] += x in one indivisible step (atomicAdd on the GPU): safe while others add.
    void atomic_add(int64_t e, T x) const {
      std::atomic_ref<T>(acc_->at(e)).fetch_add(x, std::memory_order_relaxed);
    }
    // A plain element: read it, write it, or += (a read, then a write; not atomic).
    Element operator[](int64_t e) const { return Element(*this, e); }

   private:
    friend class DQAccumulator;
    friend class Element;
    Worker(DQAccumulator* acc, std::unordered_map<int64_t, T>* held) : acc_(acc), held_(held) {}
    DQAccumulator* acc_;
    std::unordered_map<int64_t, T>* held_;  // this worker's writes not landed yet
  };

  class Element {
   public:
    // This worker's own held write, if it made one this round; else the value in memory.
    operator T() const {
      const auto mine = w_.held_->find(e_);
      if (mine != w_.held_->end()) return mine->second;
      return std::atomic_ref<T>(w_.acc_->at(e_)).load(std::memory_order_relaxed);
    }
    // Held until the round ends.
    Element& operator=(T x) {
      w_.acc_->at(e_);  // the same bounds check as a read
      (*w_.held_)[e_] = x;
      return *this;
    }
    Element& operator=(const Element& other) { return *this = static_cast<T>(other); }
    Element& operator+=(T x) { return *this = static_cast<T>(*this) + x; }

   private:
    friend class Worker;
    Element(const Worker& w, int64_t e) : w_(w), e_(e) {}
    Element(const Element&) = default;
    Worker w_;
    int64_t e_;
  };

  Worker worker(int64_t w) { return Worker(this, &held_.at(static_cast<size_t>(w))); }

  // The end of a round for worker w: its held writes land (concurrent landings of two workers on
  // one element leave one of them).
  void land(int64_t w) {
    auto& held = held_[static_cast<size_t>(w)];
    for (const auto& [e, x] : held)
      std::atomic_ref<T>(values_[static_cast<size_t>(e)]).store(x, std::memory_order_relaxed);
    held.clear();
  }

  // Once the rounds are over.
  const std::vector<T>& values() const { return values_; }

 private:
  T& at(int64_t e) {
    if (e < 0 || e >= static_cast<int64_t>(values_.size()))
      throw std::out_of_range("dQaccum has no element " + std::to_string(e) + " (it has " +
                              std::to_string(values_.size()) + ")");
    return values_[static_cast<size_t>(e)];
  }

  std::vector<T> values_;
  std::vector<std::unordered_map<int64_t, T>> held_;
};

// Runs `rounds` rounds of the workers on `threads` threads: in round i, workers[w].visit(i,
// acc.worker(w)) for every w, then every held write lands. The visits of a round run at the same
// time, on as many threads as there are. A worker that throws makes no further visit, nor does any
// other; the first exception is rethrown when the rounds are over.
template <class T, class W>
void run_in_lockstep(std::vector<W>& workers, int64_t rounds, DQAccumulator<T>& acc, int threads) {
  const int64_t n = static_cast<int64_t>(workers.size());
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  for (int64_t i = 0; i < rounds; ++i) {
#pragma omp for schedule(dynamic)
    for (int64_t w = 0; w < n; ++w) {
      if (failed.load(std::memory_order_relaxed)) continue;
      try {
        workers[static_cast<size_t>(w)].visit(i, acc.worker(w));
      } catch (...) {
#pragma omp critical(flashlab_lockstep_failure)
        if (!failure) failure = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
    // (the end of the loop above is a barrier: every visit of round i is over)
#pragma omp for
    for (int64_t w = 0; w < n; ++w) acc.land(w);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace flashlab::cpu
