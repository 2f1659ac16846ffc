#include "rt/cuda_stream.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"

namespace rt {

CudaStream::CudaStream(int device, bool non_blocking) : device_(device) {
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  RT_CU_CHECK(d.cuStreamCreate(&stream_, non_blocking ? cu::kStreamNonBlocking : cu::kStreamDefault), "cuStreamCreate",
              "cuda:", device);
}

CudaStream::~CudaStream() {
  if (!stream_) return;
  try {
    const CudaDriver& d = cuda_driver();
    cuda_context(device_);
    d.cuStreamDestroy(stream_);
  } catch (...) {
  }
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    CudaStream old(std::move(*this));
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void CudaStream::synchronize() const {
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  RT_CU_CHECK(d.cuStreamSynchronize(stream_), "cuStreamSynchronize", "cuda:", device_);
}

CudaEvent::CudaEvent(int device, bool timing) : device_(device) {
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  RT_CU_CHECK(d.cuEventCreate(&event_, timing ? cu::kEventDefault : cu::kEventDisableTiming), "cuEventCreate",
              "cuda:", device);
}

CudaEvent::~CudaEvent() {
  if (!event_) return;
  try {
    const CudaDriver& d = cuda_driver();
    cuda_context(device_);
    d.cuEventDestroy(event_);
  } catch (...) {
  }
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    CudaEvent old(std::move(*this));
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void CudaEvent::record(CuStream stream) {
  RT_ICHECK(event_, "CudaEvent::record on a moved-from event");
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  RT_CU_CHECK(d.cuEventRecord(event_, stream), "cuEventRecord", "cuda:", device_);
}

void CudaEvent::synchronize() const {
  RT_ICHECK(event_, "CudaEvent::synchronize on a moved-from event");
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  RT_CU_CHECK(d.cuEventSynchronize(event_), "cuEventSynchronize", "cuda:", device_);
}

bool CudaEvent::query() const {
  RT_ICHECK(event_, "CudaEvent::query on a moved-from event");
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  const CuResult rc = d.cuEventQuery(event_);
  if (rc == cu::kErrorNotReady) return false;
  RT_CU_CHECK(rc, "cuEventQuery", "cuda:", device_);
  return true;
}

void CudaEvent::stream_wait(CuStream stream) const {
  RT_ICHECK(event_, "CudaEvent::stream_wait on a moved-from event");
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  RT_CU_CHECK(d.cuStreamWaitEvent(stream, event_, 0), "cuStreamWaitEvent", "cuda:", device_);
}

double CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  RT_ICHECK(start.event_ && end.event_, "CudaEvent::elapsed_ms on a moved-from event");
  end.synchronize();
  const CudaDriver& d = cuda_driver();
  float ms = 0;
  RT_CU_CHECK(d.cuEventElapsedTime(&ms, start.event_, end.event_), "cuEventElapsedTime", "cuda:", end.device_);
  return ms;
}

CudaGraph::CudaGraph(CuStream stream, int device, const std::function<void()>& enqueue) : device_(device) {
  const CudaDriver& d = cuda_driver();
  RT_USER_CHECK(d.cuStreamBeginCapture && d.cuStreamEndCapture && d.cuGraphInstantiateWithFlags && d.cuGraphLaunch &&
                    d.cuGraphExecDestroy && d.cuGraphDestroy,
                "CUDA graphs need a driver with stream capture and cuGraphInstantiateWithFlags (CUDA 11.4 or newer); ",
                d.library_path, " is version ", d.version_string());
  cuda_context(device);
  constexpr int kRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED
  RT_CU_CHECK(d.cuStreamBeginCapture(stream, kRelaxed), "cuStreamBeginCapture", "cuda:", device);
  try {
    enqueue();
  } catch (...) {
    CuGraph partial = nullptr;
    if (d.cuStreamEndCapture(stream, &partial) == cu::kSuccess && partial) d.cuGraphDestroy(partial);
    throw;
  }
  RT_CU_CHECK(d.cuStreamEndCapture(stream, &graph_), "cuStreamEndCapture", "cuda:", device);
  const CuResult rc = d.cuGraphInstantiateWithFlags(&exec_, graph_, 0);
  if (rc != cu::kSuccess) {
    d.cuGraphDestroy(graph_);
    RT_CU_CHECK(rc, "cuGraphInstantiateWithFlags", "cuda:", device);
  }
}

CudaGraph::~CudaGraph() {
  try {
    const CudaDriver& d = cuda_driver();
    cuda_context(device_);
    d.cuGraphExecDestroy(exec_);
    d.cuGraphDestroy(graph_);
  } catch (...) {
  }
}

void CudaGraph::launch(CuStream stream) const {
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  RT_CU_CHECK(d.cuGraphLaunch(exec_, stream), "cuGraphLaunch", "cuda:", device_);
}

CudaTimer::CudaTimer(CuStream stream, int device) : CudaTimer(stream, device, Options{}) {}

CudaTimer::CudaTimer(CuStream stream, int device, Options options)
    : stream_(stream), device_(device), options_(options) {
  RT_USER_CHECK(options.warmup >= 0 && options.repeat >= 1, "CudaTimer: warmup ", options.warmup, " and repeat ",
                options.repeat, "; need warmup >= 0 and repeat >= 1");
}

CudaTiming CudaTimer::time(const std::function<void(CuStream)>& enqueue) const { return time_interleaved({enqueue}).front(); }

std::vector<CudaTiming> CudaTimer::time_interleaved(const std::vector<std::function<void(CuStream)>>& enqueues) const {
  RT_USER_CHECK(!enqueues.empty(), "CudaTimer::time_interleaved: nothing to time");
  const CudaDriver& d = cuda_driver();
  cuda_context(device_);
  // A scratch buffer overwritten before each timed call evicts the L2.
  CuDevicePtr flush = 0;
  size_t flush_bytes = 0;
  if (options_.flush_l2) {
    flush_bytes = static_cast<size_t>(std::max<int64_t>(cuda_device(device_).l2_bytes, 1 << 20)) * 2;
    flush = cuda_malloc(device_, flush_bytes, "the L2 flush buffer of CudaTimer");
  }
  struct FreeFlush {
    int device;
    CuDevicePtr ptr;
    ~FreeFlush() { cuda_free(device, ptr); }
  } free_flush{device_, flush};
  auto flush_l2 = [&] {
    if (flush)
      RT_CU_CHECK(d.cuMemsetD8Async(flush, 0, flush_bytes, stream_), "cuMemsetD8Async", "L2 flush on cuda:", device_);
  };

  for (int i = 0; i < options_.warmup; ++i)
    for (const auto& enqueue : enqueues) {
      flush_l2();
      enqueue(stream_);
    }
  const size_t calls = static_cast<size_t>(options_.repeat) * enqueues.size();
  std::vector<CudaEvent> starts, ends;
  for (size_t i = 0; i < calls; ++i) {
    starts.emplace_back(device_);
    ends.emplace_back(device_);
  }
  for (size_t i = 0; i < calls; ++i) {  // call i: repetition i / n of callable i % n
    flush_l2();
    starts[i].record(stream_);
    enqueues[i % enqueues.size()](stream_);
    ends[i].record(stream_);
  }
  std::vector<CudaTiming> timings(enqueues.size());
  for (size_t i = 0; i < calls; ++i) timings[i % enqueues.size()].samples_ms.push_back(CudaEvent::elapsed_ms(starts[i], ends[i]));
  for (CudaTiming& timing : timings) {
    std::vector<double> sorted = timing.samples_ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    timing.median_ms = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    timing.min_ms = sorted.front();
    timing.max_ms = sorted.back();
    timing.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
  }
  return timings;
}

}  // namespace rt
