#pragma once
// CUDA C++ on the host, so CI (no GPU) runs kernels' logic against their CPU references: force-included before a
// kernel source compiled as C++. A block's threads are fibers on one OS thread that switch at barriers and warp
// exchanges, blocks run one after another, and memory is host memory. What it shows: indexing, masking, the
// order of steps, barriers that are missing or sit in divergent code (a deadlock aborts), and cp.async data read
// before its wait. What it cannot: bits of the hardware's exp, mma and f32 rounding, timing, register or shared
// memory limits beyond the checks at launch. Statically declared __shared__ arrays are not refilled between blocks.
// Under AddressSanitizer the fiber switches are announced to it, and a kernel reading past a buffer is reported.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct emulated_uint3 {
  unsigned x = 0, y = 0, z = 0;
};
inline emulated_uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
using cudaStream_t = void*;

struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  uint32_t x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(uint32_t x, uint32_t y) { return {x, y}; }

namespace emulated {

// A cp.async copy: it lands when its group is waited for.
struct Copy {
  void* dst;
  const void* src;
  int bytes;
  bool valid;
};

enum class Wait { none, block, warp };

// Saves the callee-saved registers on the running stack, stores its pointer in *save and resumes the stack `to`
// (fiber_switch.cpp).
extern "C" void emulated_fiber_switch(void** save, void* to);

// AddressSanitizer's view of which stack runs (a no-op in other builds): announce a switch to the stack
// [bottom, bottom + size), then finish it on arrival, learning the stack switched from.
#if defined(__SANITIZE_ADDRESS__)
inline void start_switch(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
inline void finish_switch(void* fake_stack, const void** bottom, size_t* size) {
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
}
#else
inline void start_switch(void**, const void*, size_t) {}
inline void finish_switch(void*, const void**, size_t*) {}
#endif

// One CUDA thread: a stack of its own (`sp` while it is switched out), and its cp.async groups.
struct Fiber {
  void* sp = nullptr;
  void* fake_stack = nullptr;  // AddressSanitizer's, while switched out
  std::unique_ptr<char[]> stack;
  bool done = false;
  Wait waiting = Wait::none;
  uint64_t generation = 0;  // the barrier generation it waits to see pass
  std::vector<std::vector<Copy>> groups;
  std::vector<Copy> open_group;
};

// The block being run: its fibers, barrier counts, warp exchange words and dynamic shared memory.
struct Block {
  static constexpr size_t kStackBytes = size_t{1} << 18;
  std::vector<Fiber> fibers;
  int current = 0;
  void* scheduler = nullptr;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;  // the scheduler's stack, as AddressSanitizer reports it
  size_t scheduler_size = 0;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<int> warp_arrived, warp_size;
  std::vector<uint64_t> warp_generation;
  std::vector<uint32_t> words;  // 8 a thread, for shuffles, mma and ldmatrix operands
  std::vector<float> tiles;     // 128 a warp: an mma's product, computed by its first lane to read it
  std::vector<uint64_t> tile_generation;
  std::unique_ptr<unsigned char[]> dynamic_shared;  // exactly the launch's bytes (new[] aligns to 16)
  std::function<void()> body;
};

inline Block the_block;
inline Block& block() { return the_block; }
inline Fiber& current() { return block().fibers[size_t(block().current)]; }
inline int warp() { return int(threadIdx.x / 32); }
inline int lane() { return int(threadIdx.x % 32); }
inline void yield() {
  Fiber& f = current();
  start_switch(&f.fake_stack, block().scheduler_bottom, block().scheduler_size);
  emulated_fiber_switch(&f.sp, block().scheduler);
  finish_switch(f.fake_stack, &block().scheduler_bottom, &block().scheduler_size);
}

inline void block_barrier() {
  Block& b = block();
  if (++b.arrived == int(b.fibers.size())) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  current().waiting = Wait::block;
  current().generation = b.generation;
  yield();
}

inline void warp_barrier() {
  Block& b = block();
  const size_t w = size_t(warp());
  if (++b.warp_arrived[w] == b.warp_size[w]) {
    b.warp_arrived[w] = 0;
    ++b.warp_generation[w];
    return;
  }
  current().waiting = Wait::warp;
  current().generation = b.warp_generation[w];
  yield();
}

// Every lane of the warp posts n ≤ 8 words; returns the warp's words (8 a lane). Call release() when read.
inline const uint32_t* post(const uint32_t* words, int n) {
  uint32_t* mine = block().words.data() + size_t(threadIdx.x) * 8;
  std::copy_n(words, n, mine);
  warp_barrier();
  return block().words.data() + size_t(warp()) * 32 * 8;
}
inline void release() { warp_barrier(); }

// The value lane `source` of the warp posted.
template <class T>
T exchange(T v, int source) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  uint32_t words[2] = {0, 0};
  std::memcpy(words, &v, sizeof(T));
  const uint32_t* all = post(words, 2);
  std::memcpy(&v, all + size_t(source & 31) * 8, sizeof(T));
  release();
  return v;
}

[[noreturn]] inline void run_fiber() {
  finish_switch(nullptr, &block().scheduler_bottom, &block().scheduler_size);
  block().body();
  current().done = true;
  void* unused = nullptr;
  start_switch(nullptr, block().scheduler_bottom, block().scheduler_size);
  emulated_fiber_switch(&unused, block().scheduler);
  std::abort();
}

// A fresh stack for fiber_switch to resume: six zero registers, then run_fiber as the return address.
inline void* fresh_stack(char* base, size_t bytes) {
  auto top = (reinterpret_cast<uintptr_t>(base) + bytes - 64) & ~uintptr_t{15};
  auto* slots = reinterpret_cast<uintptr_t*>(top) - 8;
  for (int i = 0; i < 6; ++i) slots[i] = 0;
  slots[6] = reinterpret_cast<uintptr_t>(&run_fiber);
  slots[7] = 0;
  return slots;
}

// Runs one block to its end: each fiber until it finishes or waits on a barrier not yet passed, in thread order, or
// in reverse order when `reversed` (so a read that no barrier orders after another thread's write sees stale data
// in one of the two orders, whichever thread writes).
inline void run_block(unsigned threads, dim3 block_shape, bool reversed) {
  Block& b = block();
  for (;;) {
    bool ran = false, finished = true;
    for (unsigned i = 0; i < threads; ++i) {
      const unsigned t = reversed ? threads - 1 - i : i;
      Fiber& f = b.fibers[t];
      if (f.done) continue;
      finished = false;
      if (f.waiting == Wait::block && b.generation == f.generation) continue;
      if (f.waiting == Wait::warp && b.warp_generation[t / 32] == f.generation) continue;
      f.waiting = Wait::none;
      b.current = int(t);
      threadIdx = {t % block_shape.x, (t / block_shape.x) % block_shape.y, t / (block_shape.x * block_shape.y)};
      start_switch(&b.scheduler_fake_stack, f.stack.get(), Block::kStackBytes);
      emulated_fiber_switch(&b.scheduler, f.sp);
      finish_switch(b.scheduler_fake_stack, nullptr, nullptr);
      ran = true;
    }
    if (finished) return;
    if (!ran) {
      std::fprintf(stderr, "emulated CUDA: block (%u, %u, %u) deadlocks: a barrier not every thread reaches\n",
                   blockIdx.x, blockIdx.y, blockIdx.z);
      std::abort();
    }
  }
}

inline constexpr unsigned kMaxSharedBytes = 227 * 1024;  // a Hopper block's dynamic shared memory

// kernel(args...) over the grid, a block at a time.
template <class Kernel, class... Args>
void launch(const char* what, Kernel kernel, dim3 grid, dim3 block_shape, unsigned shared_bytes, Args... args) {
  const unsigned threads = block_shape.x * block_shape.y * block_shape.z;
  if (threads == 0 || threads > 1024 || shared_bytes > kMaxSharedBytes)
    throw std::runtime_error(std::string(what) + ": a block of " + std::to_string(threads) + " threads and " +
                             std::to_string(shared_bytes) + " shared bytes cannot launch");
  Block& b = block();
  b.fibers.resize(threads);
  for (Fiber& f : b.fibers)
    if (!f.stack) f.stack.reset(new char[Block::kStackBytes]);
  const unsigned warps = (threads + 31) / 32;
  b.warp_arrived.assign(warps, 0);
  b.warp_generation.assign(warps, 0);
  b.warp_size.assign(warps, 0);
  for (unsigned w = 0; w < warps; ++w) b.warp_size[w] = int(std::min(32u, threads - 32 * w));
  b.words.assign(size_t(threads) * 8, 0);
  b.tiles.assign(size_t(warps) * 128, 0.0f);
  b.tile_generation.assign(warps, ~uint64_t{0});
  b.body = [&] { kernel(args...); };
  blockDim = block_shape;
  gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.dynamic_shared.reset(new unsigned char[std::max(shared_bytes, 1u)]);
        std::fill_n(b.dynamic_shared.get(), shared_bytes, 0xa5);  // garbage, as a fresh block finds it
        b.arrived = 0;
        for (Fiber& f : b.fibers) {
          f.done = false;
          f.waiting = Wait::none;
          f.groups.clear();
          f.open_group.clear();
          f.sp = fresh_stack(f.stack.get(), Block::kStackBytes);
        }
        blockIdx = {x, y, z};
        run_block(threads, block_shape, (x + y + z) % 2 == 1);
      }
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(block().dynamic_shared.get());
}

}  // namespace emulated

inline float __uint_as_float(uint32_t u) { return std::bit_cast<float>(u); }
inline uint32_t __float_as_uint(float f) { return std::bit_cast<uint32_t>(f); }

inline void __syncthreads() { emulated::block_barrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emulated::warp_barrier(); }
template <class T>
T __shfl_sync(unsigned, T v, int source) {
  return emulated::exchange(v, source);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return emulated::exchange(v, emulated::lane() ^ mask);
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta) {
  const int source = emulated::lane() - int(delta);
  const T got = emulated::exchange(v, source & 31);
  return source >= 0 ? got : v;
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
  const int source = emulated::lane() + int(delta);
  const T got = emulated::exchange(v, source & 31);
  return source < 32 ? got : v;
}
template <class T>
T __ldcg(const T* p) {
  return *p;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline unsigned atomicMax(unsigned* p, unsigned v) {
  std::atomic_ref<unsigned> a(*p);
  unsigned seen = a.load();
  while (seen < v && !a.compare_exchange_weak(seen, v)) {
  }
  return seen;
}
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float exp2f(float x) { return std::exp2(x); }
using std::max;
using std::min;

// bf16 as cuda_bf16.h rounds it: to nearest even, as core/dtype.h does.
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {fs::f32_to_bf16(f)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return fs::bf16_to_f32(h.bits); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }

// f16 as cuda_fp16.h rounds it (core/dtype.h's conversion).
struct __half {
  uint16_t bits;
};
inline __half __float2half_rn(float f) { return {fs::f32_to_f16(f)}; }
inline uint16_t __half_as_ushort(__half h) { return h.bits; }
