// One core's speed, for comparing machines on latency-bound work (issue 17's seed64 line): a
// chain of dependent integer adds (one cycle each on every x86 core since the Pentium 4), so
// its rate is the core's clock as the program sees it, turbo and the hypervisor included; a
// chain of dependent FMAs (4 cycles on Zen 4 and on Intel cores since Skylake); and a pointer
// chase through 256 KiB (L2) and 16 KiB (L1). Medians of 15 timings, printed as one JSON line.
//   cc -O2 -o /tmp/core_speed bench/core_speed.c && /tmp/core_speed
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#define REPS 15
static double median(double* v) {
  qsort(v, REPS, sizeof *v, cmp);
  return v[REPS / 2];
}

// Seconds per dependent add: 16 adds per iteration, each waiting for the one before.
static double add_chain(long iters) {
  uint64_t x = 1, y = 3;
  double t = now();
  for (long i = 0; i < iters; ++i) {
    __asm__ volatile(
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
        : "+r"(x)
        : "r"(y));
  }
  return (now() - t) / (16.0 * iters);
}

// Seconds per dependent fused multiply-add (scalar, single precision).
static double fma_chain(long iters) {
  float x = 1.0f, a = 0.999f, b = 1e-7f;
  double t = now();
  for (long i = 0; i < iters; ++i) {
    __asm__ volatile(
        "vfmadd132ss %1, %2, %0\n\tvfmadd132ss %1, %2, %0\n\t"
        "vfmadd132ss %1, %2, %0\n\tvfmadd132ss %1, %2, %0\n\t"
        "vfmadd132ss %1, %2, %0\n\tvfmadd132ss %1, %2, %0\n\t"
        "vfmadd132ss %1, %2, %0\n\tvfmadd132ss %1, %2, %0"
        : "+x"(x)
        : "x"(a), "x"(b));
  }
  return (now() - t) / (8.0 * iters);
}

// Seconds per load of a pointer chase over `bytes` (a random cycle of cache lines).
static double chase(size_t bytes, long loads) {
  size_t n = bytes / 64;
  void** mem = aligned_alloc(64, n * 64);
  size_t* order = malloc(n * sizeof *order);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  srand(7);
  for (size_t i = n - 1; i > 0; --i) {
    size_t j = (size_t)rand() % (i + 1), s = order[i];
    order[i] = order[j];
    order[j] = s;
  }
  for (size_t i = 0; i < n; ++i) mem[order[i] * 8] = &mem[order[(i + 1) % n] * 8];
  void** p = &mem[order[0] * 8];
  for (long i = 0; i < loads; ++i) p = (void**)*p;  // warm
  double t = now();
  for (long i = 0; i < loads; ++i) p = (void**)*p;
  double s = (now() - t) / loads;
  if (p == NULL) puts("");
  free(order);
  free(mem);
  return s;
}

int main(void) {
  double add[REPS], fma[REPS], l1[REPS], l2[REPS];
  for (int r = 0; r < REPS; ++r) {
    add[r] = add_chain(2000000);
    fma[r] = fma_chain(1000000);
    l1[r] = chase(16 << 10, 2000000);
    l2[r] = chase(256 << 10, 2000000);
  }
  const double add_s = median(add);
  printf(
      "{\"add_chain_ghz\": %.3f, \"fma_latency_ns\": %.3f, \"l1_chase_ns\": %.3f, "
      "\"l2_chase_ns\": %.3f}\n",
      1e-9 / add_s, median(fma) * 1e9, median(l1) * 1e9, median(l2) * 1e9);
  return 0;
}
