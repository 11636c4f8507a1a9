// Whether a compile is being served by the caches or has to build: what a call that started a
// compile in the background (CompileOptions::async_compile) waits on.
//
// Such a call waits for its compile only while the caches serve it: until it finishes, or until
// any compile of the process begins the work that only a miss makes (code generation for a graph
// the graph level lacked, a run of the system compiler); then it runs eagerly. The count is
// process-wide, not per compile, because the parts of one compile run on threads of their own;
// another module's compile waking a caller early only makes that caller run eagerly once.
#pragma once

#include <cstdint>
#include <functional>

namespace zc::runtime {

// The compile path calls this before it generates code or runs the compiler.
void note_cold_work();
// Cold work begun in this process so far.
uint64_t cold_work_count();
// Wakes the waiters; called when a background compile finishes, whichever way.
void note_compile_finished();
// Waits until `done()` holds or cold work began after `since` (a cold_work_count()). `done` is
// evaluated with the events' lock held: it must only read state.
void wait_until_done_or_cold(uint64_t since, const std::function<bool()>& done);

}  // namespace zc::runtime
