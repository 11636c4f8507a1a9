// zc::compile: wrap a module so that calling it runs a captured, compiled graph.
//
//   auto fast = zc::compile(model);   // nothing happens yet
//   Tensor y = fast(x);               // first call: capture, compile, run; later calls: run
//
// A call computes a guard key from the input's metadata (dtype, shape, device, contiguity)
// and the module's structure; a new key captures and compiles again (a recompile), a known key
// runs the compiled graph directly. Handles are cheap to copy and callable from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zc/dtype.h"
#include "zc/dynamic_dim.h"
#include "zc/nn.h"
#include "zc/tensor.h"

namespace zc {

// Default: compile fast. MaxAutotune: also time the ways each library product (GEMM) of the
// compiled code can run on this machine (library, threads, batch sharing) and keep the
// fastest; the choices are cached per CPU and library versions, so a warm process, a bundle
// or the remote tier time nothing (docs/codegen.md, "max_autotune").
enum class Mode : uint8_t { Default, MaxAutotune };
// Highest: f32 products in f32. Bf16: on the CPU, large f32 products (at least 2^22
// multiply-adds: Linear layers, not attention's heads) round their operands to bfloat16 and
// accumulate in f32, on AMX or AVX-512 BF16 through oneDNN (2.5-4x the f32 rate on a Sapphire
// Rapids Xeon); about 2^-8 sqrt(K) relative error per product, a few 1e-3 on a GPT's logits
// (docs/codegen.md, "bf16 products"). On a CPU without bf16 they stay f32. Like torch's
// set_float32_matmul_precision("medium"). Tf32: on a GPU, f32 products (cuBLASLt) and
// convolutions (their columns' products, or cuDNN) may round their operands to TF32 (10 bits of
// mantissa) on tensor cores, accumulating in f32: about 1e-3 relative error per product. Like
// torch's set_float32_matmul_precision("high"), and what torch does to f32 convolutions by
// default (torch.backends.cudnn.allow_tf32). On the CPU, as Highest.
enum class MatmulPrecision : uint8_t { Highest, Bf16, Tf32 };
// Auto: compile a block repeated across the model once and call it (hierarchical
// compilation); None: compile the whole graph inline.
enum class Regions : uint8_t { Auto, None };

// Dynamic shapes (docs/dynamic-shapes.md). Auto: a dim that shows a second size on a guard
// miss becomes dynamic, and the module compiles once for every size of it; a graph whose
// products go to a library gets that code at its first call already (sizes first, ADR 0032),
// so its second size recompiles without running the compiler. Static: every size compiles
// anew, with its sizes as constants; All: every dim of the input is dynamic from the first
// call. Sizes 0 and 1 are never dynamic: they compile as themselves, as torch.compile
// specializes them.
enum class Dynamic : uint8_t { Auto, Static, All };

// The accuracy check (docs/serving.md, "Accuracy check"): the first `calls` calls of each
// compiled specialization (each set of input shapes and dtypes that compiled) also run the
// module eagerly (uncompiled, recording no gradients) on the same inputs and compare every
// output: shape and dtype, max abs and rel difference, NaN or Inf where eager has none. An
// element passes when |compiled - eager| <= atol * max(1, max|eager|) + rtol * |eager|: the
// absolute part grows with the output's scale, as the rounding of long sums does. Tolerances
// by dtype (negative atol/rtol: these): f64 1e-7; f32 1e-4 (2e-2 under MatmulPrecision::Bf16);
// f16 1e-2; bf16 2e-2; integers and booleans exact. A failure prints a warning and, for a
// whole graph, finds the first kernel whose value diverges while its inputs do not (one
// compile of a prefix of the graph per step of a binary search) and names it. The user always
// gets the compiled outputs. Reports: zc::compiler::accuracy_reports(). ZC_ACCURACY_CHECK=N
// (N >= 1) checks the first N calls of every module compiled while `calls` is 0.
struct AccuracyCheck {
  int64_t calls = 0;  // first calls checked per specialization; 0: off
  double atol = -1;
  double rtol = -1;
  bool bisect = true;  // on a failure, find the first diverging kernel
};

struct CompileOptions {
  Mode mode = Mode::Default;
  MatmulPrecision matmul_precision = MatmulPrecision::Highest;
  bool fullgraph = false;  // a graph break becomes a zc::Error instead
  Regions regions = Regions::Auto;
  // "auto": the code-generating backend of the inputs' device ("cpp" for CPU tensors), or the
  // interpreter, with one warning, when this process cannot use it (no C++ compiler). A name
  // ("cpp", "eager") must be a backend of this build that can run here: compile() raises
  // otherwise, naming the reason.
  std::string backend = "auto";
  // On a GPU, record a compiled graph's kernel launches once as a CUDA graph and replay it on
  // later calls (one launch per call; torch.compile's mode="reduce-overhead"). The user's input
  // is copied into the recording and the outputs out of it, so results are fresh tensors and
  // inputs may be freed and reallocated freely. Off: every call launches every kernel.
  bool cuda_graphs = true;
  Dynamic dynamic = Dynamic::Auto;
  // Dims dynamic from the first call, under any `dynamic` but Static.
  std::vector<DynamicDim> dynamic_dims;
  // Compile in the background (docs/serving.md): a call whose inputs no compiled graph serves
  // starts their compile on another thread and waits for it only while the caches serve it (a
  // warm cache: a load of milliseconds); once a compiler would run, the call runs the module's
  // forward eagerly, as does every call of those inputs until their code is ready. Then calls
  // switch to it. A call never waits for the system compiler. A failed background compile is
  // printed once and its inputs keep running eagerly (wait_for_compiles() raises it).
  bool async_compile = false;
  // ROI report (compiler::report()): time a few calls eagerly instead of compiled (the 2nd,
  // 10th, 100th, 1000th... call of the module) so the report can say what compiling saves.
  // ZC_LOGS=roi turns it on for every module.
  bool roi_sampling = false;
  // Also stop compiling a module whose eager forward measures faster than its compiled code
  // (by more than 5%, from the 10th call on): it runs eagerly from then on, logged. Implies
  // roi_sampling.
  bool roi_guard = false;
  AccuracyCheck accuracy_check;
  // Training calls: how much of the activation memory the backward may keep, as torch's
  // activation_memory_budget. 1 (the default): the forward saves what the backward reads
  // unless it is cheap to run again (elementwise and layout ops). Below 1 the backward may run
  // any forward op again, products and attention included: the partition saves at most
  // least + budget * (default - least) bytes, `least` being the least any partition saves, with
  // the least recomputation that fits (docs/training.md, "Activation memory"). In [0, 1].
  double activation_memory_budget = 1.0;
};

// What CompiledModule::warmup did for each example call.
struct WarmupReport {
  struct Item {
    std::string inputs;  // "input [4, 128] i64"
    // "compiled (3 compiler runs)", "from the caches", "already compiled", "served by a size
    // template", or "traced on every call (graph break)"
    std::string result;
    bool training = false;  // the backward was compiled too (the call wants gradients)
    int64_t compiler_runs = 0;
    double ms = 0;
  };
  std::vector<Item> items;
  double ms = 0;
  int64_t compiler_runs = 0;
  std::string str() const;
  std::string json() const;
};

class CompiledModule {
 public:
  // The one-tensor call: the module's forward must return one tensor.
  Tensor operator()(const Tensor& x) const;
  // Several inputs, every output: the module's many-input forward. Each input is guarded like
  // the one of a one-tensor call (a new dtype, rank or layout of any recompiles, a new size
  // follows CompileOptions::dynamic); the inputs share one device.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  const std::shared_ptr<nn::Module>& module() const;
  const CompileOptions& options() const;

  // Compiles (or loads from the caches) everything these calls need, before traffic arrives:
  // each element is one call's inputs. Calls whose inputs or the module's parameters want
  // gradients compile their backward too. Runs no arithmetic of the model (beyond what a graph
  // break's segments need to trace), waits for the compiler even under async_compile, and
  // raises what compiling raises.
  WarmupReport warmup(const std::vector<std::vector<Tensor>>& calls) const;
  // One-tensor calls: fast.warmup({x_batch1, x_batch8}).
  WarmupReport warmup(const std::vector<Tensor>& one_tensor_calls) const;
  // Waits until the background compiles (async_compile) started so far have finished; raises
  // zc::Error naming the inputs and the error of each one that failed.
  void wait_for_compiles() const;

  struct State;
  explicit CompiledModule(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// Raises zc::Error for an unknown backend, a named backend that cannot run in this process, or
// a null module.
CompiledModule compile(std::shared_ptr<nn::Module> module, CompileOptions options = {});

// Regional compilation by hand: a module that runs `module` compiled, to sit inside an eager
// model (layers->push_back(zc::compiled(std::make_shared<Layer>()))). Instances with the same
// graph share one executable; their weights stay their own. Its type name is the wrapped
// module's, so a compiled model around it still sees the repeated block.
std::shared_ptr<nn::Module> compiled(std::shared_ptr<nn::Module> module,
                                     CompileOptions options = {});

namespace compiler {

// Counters and per-stage times of this process (since start or the last reset_stats()).
struct Stats {
  int64_t graphs_captured = 0;  // traces that produced a graph
  int64_t recompiles = 0;       // captures caused by a guard miss on an already-compiled module
  int64_t graph_breaks = 0;
  int64_t code_cache_hits = 0;  // graphs whose executable was already loaded in this process
  int64_t code_cache_misses = 0;
  int64_t guard_hits = 0;            // calls that ran without capturing
  int64_t compiler_invocations = 0;  // runs of the system C++ compiler
  int64_t kernels_generated = 0;
  int64_t extern_ops = 0;        // ops run outside generated code: eager kernels, cuDNN calls
  int64_t regions_found = 0;     // calls of repeated blocks found by Regions::Auto
  int64_t region_graphs = 0;     // distinct repeated blocks among them
  int64_t parts_compiled = 0;    // distinct graphs compiled (or loaded) for those compiles
  int64_t parts_reused = 0;      // calls that reused one of them
  int64_t graph_recordings = 0;  // CUDA graphs recorded (CompileOptions::cuda_graphs)
  int64_t graph_replays = 0;     // calls that replayed one
  // Dynamic shapes (docs/dynamic-shapes.md): graphs whose code was made once for many sizes,
  // graphs of a new size that ran such code without compiling, and graphs whose structure has
  // such code that did not serve their sizes (ZC_LOGS=recompiles says why; they compiled).
  int64_t size_templates = 0;
  int64_t template_hits = 0;
  int64_t template_refusals = 0;
  // Compiled training: backward graphs derived from the derivative rules and partitioned; a
  // warm process reads them from the cache instead.
  int64_t backwards_derived = 0;
  // Mode::MaxAutotune: library products whose candidate implementations were timed, and those
  // whose choice came from the cache instead (a warm process times nothing).
  int64_t autotune_timings = 0;
  int64_t autotune_hits = 0;
  // Graphs loaded before the compile that needs them asked, because the previous process
  // recorded that this compile loads them (a warm training step's backward).
  int64_t graphs_preloaded = 0;
  // CompileOptions::async_compile: compiles started on a background thread, and calls that ran
  // the module's forward eagerly meanwhile (or after their compile failed, or under roi_guard).
  int64_t async_compiles = 0;
  int64_t eager_calls = 0;
  // CompileOptions::accuracy_check: calls compared against eager, and those that failed.
  int64_t accuracy_checks = 0;
  int64_t accuracy_failures = 0;
  // Weights converted into a kernel's own layout and kept across calls (a product's B packed
  // for oneDNN, a convolution's weight blocked): once per weight while it stays the same.
  int64_t weights_kept = 0;
  // Compiled calls with gradients wanted, and the bytes their forwards saved for the backward
  // (the activation memory CompileOptions::activation_memory_budget trades for recomputation),
  // summed over the calls.
  int64_t training_calls = 0;
  int64_t saved_bytes = 0;
  // Wall time that calls spent before running anything: capture, region planning, cache
  // lookups, compiling or loading. What a start costs; the first call also runs the arithmetic.
  // A training call's backward compiles while its forward runs, outside this time.
  double ready_ms = 0;
  double capture_ms = 0;  // tracing forward() into graphs
  // Everything after capture up to a loaded executable, summed over the graphs (the parts of
  // a hierarchical compile run in parallel, so this can exceed ready_ms):
  double compile_ms = 0;
  double lower_ms = 0;      //   decompositions and canonicalization
  double codegen_ms = 0;    //   scheduling, buffer planning, emitting source
  double cxx_ms = 0;        //   the system C++ compiler
  double load_ms = 0;       //   loading the shared object
  double autotune_ms = 0;   //   max_autotune: timing candidates, or reading its choices
  std::string str() const;  // a readable table
  std::string json() const;
};

Stats stats();
void reset_stats();
// Mode::MaxAutotune's choices in this process, timed or read from the cache, one line per
// distinct product, ordered: "f32 NN 512x768x256 ld 256,768,768 -> oneDNN, 8 of 16 threads
// (412.0 us; default 455.1 us)".
std::vector<std::string> autotune_choices();
// The return on compile time of one compiled module (runtime/debug/roi.h): what compiling cost,
// what a call costs compiled and eagerly, after how many calls the compile pays for itself.
struct ModuleRoi {
  std::string module;  // type name and creation number: "GPT#1"
  int64_t compiles = 0;
  double compile_ms = 0;  // capture, compile or load, in the foreground or the background
  int64_t compiled_calls = 0;
  double compiled_ms_per_call = 0;  // the median of the last 64 compiled calls
  int64_t eager_calls = 0;          // calls that ran eagerly (async compile, samples, roi_guard)
  int64_t eager_samples = 0;        // of which samples (CompileOptions::roi_sampling)
  double eager_ms_per_call = 0;     // the median of the eager calls
  // Known once both kinds of call were timed: eager minus compiled per call; calls for the
  // compile to pay off (-1: never, or unknown); what compiling saved so far minus its cost.
  double gain_ms_per_call = 0;
  int64_t break_even_calls = -1;
  double net_ms = 0;
  bool gave_up = false;  // roi_guard found compiled code slower: it runs eagerly
  std::string str() const;
};

struct Report {
  std::vector<ModuleRoi> modules;  // in creation order, including modules since destroyed
  std::string str() const;
  std::string json() const;
};

// Every compiled module of this process; ZC_LOGS=roi also prints it at exit.
Report report();

// One output of an accuracy-checked call (CompileOptions::accuracy_check).
struct AccuracyOutput {
  std::vector<int64_t> shape;  // the compiled output's
  DType dtype = DType::f32;
  double max_abs = 0;  // max |compiled - eager|
  // max |compiled - eager| / |eager| over elements larger than the absolute tolerance
  double max_rel = 0;
  double atol = 0, rtol = 0;  // the tolerances it was held to
  bool passed = true;
  std::string problem;  // why it failed, when not by its difference alone; empty otherwise
};

// The first value of the graph whose compiled value diverges while the values it reads do not.
struct AccuracyCulprit {
  int64_t kernel = -1;      // its kernel in the graph's flat schedule (symbol zc_k<kernel>_...)
  std::string kernel_kind;  // "pointwise", "row_reduce", "matmul", ...
  std::vector<std::string> kernel_ops;  // the ops fused into that kernel, in order
  int64_t node = -1;                    // the node in the lowered graph that computes it
  std::string op;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  // The module calls it came from, outermost first, "/" between them; the compiled module's
  // own forward is not one ("zc::nn::TransformerBlock/zc::nn::Linear").
  std::string region;
  double max_abs = 0, max_rel = 0;
  // "kernel 0 (matmul: matmul, add, tanh; zc_k0_matmul) computing node 3 = tanh [4,32] f32
  // in zc::nn::Tanh: max abs 1.09, max rel 347, while its inputs match eager"
  std::string str() const;
};

struct AccuracyReport {
  std::string module_type;
  std::vector<std::vector<int64_t>> input_shapes;
  int64_t call = 0;  // which call of its specialization (1 = the first)
  std::vector<AccuracyOutput> outputs;
  bool passed = true;
  // On a failure: whether the search ran, and what it found. `culprit_found` is false when it
  // did not run (a graph break, bisect off) or the graph compiled flat matched eager.
  bool bisected = false;
  bool culprit_found = false;
  AccuracyCulprit culprit;
  std::string note;         // why no culprit was named, or why the outputs could not be compared
  std::string str() const;  // one line, as the warning and ZC_LOGS=accuracy print it
};

// The reports of this process's checked calls, oldest first (the last 1000; reset_stats()
// clears them).
std::vector<AccuracyReport> accuracy_reports();
// Drops every compiled graph of this process; compiled modules capture again on their next
// call. Persistent caches are kept.
void reset();

}  // namespace compiler
}  // namespace zc
