#include "lower/canonicalize.h"

#include "ir/canonical.h"
#include "lower/cse.h"
#include "lower/dce.h"
#include "lower/fold_constants.h"
#include "lower/peephole.h"

namespace zc::lower {

namespace {

// A round that changes nothing ends the loop; real graphs settle in two or three rounds, and
// the cap only bounds the work should one pass ever undo another's rewrite.
constexpr int kMaxRounds = 8;

ir::Graph one_round(const ir::Graph& g) {
  ir::Graph out = peephole(g);
  out = fold_constants(out);
  out = eliminate_common_subexpressions(out);
  return eliminate_dead_code(out);
}

}  // namespace

ir::Graph canonicalize(const ir::Graph& g) {
  ir::Graph cur = one_round(g);
  std::vector<uint8_t> before = ir::canonical_bytes(g), after = ir::canonical_bytes(cur);
  for (int i = 1; i < kMaxRounds && after != before; ++i) {
    cur = one_round(cur);
    before = std::move(after);
    after = ir::canonical_bytes(cur);
  }
  return cur;
}

}  // namespace zc::lower
