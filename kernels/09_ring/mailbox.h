// The simulated ring: one mailbox per rank. Rank r puts its messages into rank r + 1's mailbox and
// takes its own from its mailbox, which only rank r - 1 fills. A mailbox is a queue, so the
// messages arrive in the order they were sent whatever the threads' timing: the ring's results
// do not depend on the scheduler. A send never waits (the queue holds what the receiver has not
// taken yet, as NCCL's send completes into the peer's buffer); a receive waits for its message.
//
//   rank 0 --> [box 1] rank 1 --> [box 2] rank 2 --> ... rank R-1 --> [box 0] rank 0
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashlab::cpu::FLASHLAB_FOLDER {

enum class Payload { kv, grad };

// One message: a K/V shard (K, V as stored, exact in double) or its dK, dV accumulators (in the
// twin's compute type T). A dry run sends the sizes only.
template <class T>
struct Message {
  Payload kind = Payload::kv;
  int step = 0;
  int owner = 0;      // the rank whose shard it is
  int64_t bytes = 0;  // what the transfer moves (ring.h: stored dtype for K, V; T for dK, dV)
  std::vector<double> K, V;
  std::vector<T> dK, dV;
};

template <class T>
class Ring {
 public:
  explicit Ring(int ranks) : boxes_(static_cast<size_t>(ranks)) {}

  void send(int from, Message<T>&& m) {
    Box& b = boxes_[static_cast<size_t>((from + 1) % size())];
    {
      std::lock_guard<std::mutex> lock(b.mutex);
      b.queue.push_back(std::move(m));
    }
    b.ready.notify_one();
  }

  // The next message of rank `at`, which must be the one the schedule expects.
  Message<T> receive(int at, Payload kind, int step) {
    Box& b = boxes_[static_cast<size_t>(at)];
    std::unique_lock<std::mutex> lock(b.mutex);
    b.ready.wait(lock, [&] { return !b.queue.empty() || stopped_; });
    if (b.queue.empty()) throw std::runtime_error("ring: another rank stopped");
    Message<T> m = std::move(b.queue.front());
    b.queue.pop_front();
    if (m.kind != kind || m.step != step)
      throw std::logic_error("ring: rank " + std::to_string(at) + " got step " +
                             std::to_string(m.step) + "'s message at step " + std::to_string(step));
    return m;
  }

  // A rank failed: wake every receiver, which then throws instead of waiting forever.
  void stop() {
    for (Box& b : boxes_) {
      {
        std::lock_guard<std::mutex> lock(b.mutex);
        stopped_ = true;
      }
      b.ready.notify_all();
    }
  }

 private:
  struct Box {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Message<T>> queue;
  };
  int size() const { return static_cast<int>(boxes_.size()); }
  std::vector<Box> boxes_;
  bool stopped_ = false;  // written under every box's lock, read under one
};

}  // namespace flashlab::cpu::FLASHLAB_FOLDER
