// Streams, events and timing with device events (DESIGN "Tests and measurements": GPU figures are
// taken with device events, after warm-up, median of many runs).
#pragma once

#include <functional>
#include <vector>

#include "rt/cuda_driver.h"

namespace rt {

// An owned CUstream on a device's primary context. Blocking by default: it synchronizes with the
// legacy default stream, which the synchronous copies of rt::Tensor use.
class CudaStream {
 public:
  explicit CudaStream(int device = 0, bool non_blocking = false);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  CuStream handle() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  CuStream stream_ = nullptr;
  int device_ = 0;
};

// An owned CUevent.
class CudaEvent {
 public:
  explicit CudaEvent(int device = 0, bool timing = true);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  CuEvent handle() const { return event_; }
  int device() const { return device_; }
  void record(CuStream stream = nullptr);
  void synchronize() const;
  // Whether the work recorded before the event has completed (cuEventQuery; an event never recorded
  // is complete).
  bool query() const;
  // Makes `stream` (of any device) wait for the event before its later work; the host does not wait.
  void stream_wait(CuStream stream) const;
  // Milliseconds between two recorded, completed events (`end` waited for first).
  static double elapsed_ms(const CudaEvent& start, const CudaEvent& end);

 private:
  CuEvent event_ = nullptr;
  int device_ = 0;
};

// A CUDA graph of the work `enqueue` queues on a stream, captured in relaxed mode (other threads
// may allocate meanwhile; the callable must not synchronize the stream) and instantiated; launch()
// replays it. Pointers and sizes are fixed at capture: replays read and write the same memory.
class CudaGraph {
 public:
  CudaGraph(CuStream stream, int device, const std::function<void()>& enqueue);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void launch(CuStream stream) const;

 private:
  CuGraph graph_ = nullptr;
  CuGraphExec exec_ = nullptr;
  int device_ = 0;
};

struct CudaTiming {
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0;
  std::vector<double> samples_ms;  // one per repetition, in order
};

// Times a callable that enqueues GPU work on a stream: `warmup` untimed calls, then `repeat` calls
// each bracketed by events on the stream. With flush_l2, a buffer twice the L2 size is overwritten
// (outside the timed region) before each call, so every repetition starts with a cold L2.
class CudaTimer {
 public:
  struct Options {
    int warmup = 3;
    int repeat = 20;
    bool flush_l2 = false;
  };
  explicit CudaTimer(CuStream stream = nullptr, int device = 0);
  CudaTimer(CuStream stream, int device, Options options);

  // `enqueue` is called with the stream; it must not synchronize it.
  CudaTiming time(const std::function<void(CuStream)>& enqueue) const;
  double median_ms(const std::function<void(CuStream)>& enqueue) const { return time(enqueue).median_ms; }
  // Several callables timed in turns (warm-up and each repetition run all of them, in order), one
  // timing each: a comparison where the clock drifts over the run (the H200 under its power limit)
  // then sees the same drift on every side, not the whole of it on the side timed last.
  std::vector<CudaTiming> time_interleaved(const std::vector<std::function<void(CuStream)>>& enqueues) const;

 private:
  CuStream stream_;
  int device_;
  Options options_;
};

}  // namespace rt
