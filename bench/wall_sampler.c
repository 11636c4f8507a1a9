// A wall-clock sampler of a process's main thread, for where a first call's time goes (waits
// included, which a CPU-time profiler misses). Loaded with LD_PRELOAD:
//   gcc -O2 -shared -fPIC -o /tmp/libwall_sampler.so bench/wall_sampler.c -lrt
//   SAMPLER_OUT=s.txt [SAMPLER_US=250] LD_PRELOAD=/tmp/libwall_sampler.so build/zc bench --child
//   ... python3 bench/wall_sampler.py s.txt FROM_MS TO_MS [FUNCTION]
// Every SAMPLER_US microseconds a signal records the main thread's stack (raw addresses, ms since
// the process started); at exit the samples and the process's mappings go to SAMPLER_OUT, and
// wall_sampler.py names the frames with addr2line. No root, perf or debugger needed.
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXS 200000
#define DEPTH 48
static void* buf[MAXS][DEPTH];
static int depth[MAXS];
static double stamp[MAXS];
static volatile int n = 0;
static struct timespec t0;

static void handler(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)si;
  (void)uc;
  int i = n;
  if (i >= MAXS) return;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  stamp[i] = (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6;
  depth[i] = backtrace(buf[i], DEPTH);
  n = i + 1;
}

static void dump(void) {
  const char* out = getenv("SAMPLER_OUT");
  if (!out) return;
  FILE* f = fopen(out, "w");
  if (!f) return;
  for (int i = 0; i < n; ++i) {
    fprintf(f, "S %.3f", stamp[i]);
    for (int k = 0; k < depth[i]; ++k) fprintf(f, " %p", buf[i][k]);
    fprintf(f, "\n");
  }
  FILE* m = fopen("/proc/self/maps", "r");
  char line[4096];
  while (m && fgets(line, sizeof line, m)) fprintf(f, "M %s", line);
  if (m) fclose(m);
  fclose(f);
}

__attribute__((constructor)) static void start(void) {
  if (!getenv("SAMPLER_OUT")) return;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void* warm[4];
  backtrace(warm, 4);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGRTMIN + 3, &sa, NULL);
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGRTMIN + 3;
  sev._sigev_un._tid = syscall(SYS_gettid);
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) return;
  long us = getenv("SAMPLER_US") ? atol(getenv("SAMPLER_US")) : 500;
  struct itimerspec its = {{0, us * 1000}, {0, us * 1000}};
  timer_settime(timer, 0, &its, NULL);
  atexit(dump);
}
