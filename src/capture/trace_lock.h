// Captures and the eager runs of compiled modules, kept apart across threads.
//
// A capture marks the parameters and buffers of the module it traces as traced tensors, in
// place (capture/tracer.h): while it runs, an op on one of them on any thread would be recorded
// into its graph. A compiled module runs its forward outside a capture only where it runs
// eagerly on purpose (async compile while the code compiles, the eager samples of the ROI
// report, the accuracy check); those runs hold an EagerScope, captures a CaptureScope, and the
// two exclude each other process-wide (parameters may be shared between modules). Captures take
// milliseconds, so an eager run waits at most that long; a waiting capture goes before new
// eager runs, so a stream of them cannot starve it.
//
// Both nest on one thread: a capture inside a capture (a compiled block called with a fresh
// tensor) or inside an eager run, and an eager run inside either, take nothing more. Inside an
// EagerScope compiled modules run their forward as plain code (in_eager_scope()), so an eager
// run never starts a capture of its own.
#pragma once

namespace zc::capture {

class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  bool saved_ = false;
};

class EagerScope {
 public:
  EagerScope();
  ~EagerScope();
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;

 private:
  bool saved_ = false;
};

// Whether this thread is inside an EagerScope (and not in a capture begun inside it).
bool in_eager_scope();

}  // namespace zc::capture
