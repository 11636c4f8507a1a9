// A TensorMeta as bytes: what canonical graph bytes (ir/canonical.h) and a compiled function's
// call record (runtime/records/call_record.h) store for each value or input.
//
// Layout: dtype u8, device type u8, device index u32, wrapped-number flag u8, then the shape
// (rank u64, each size i64), or with `sizes` false its rank alone (structure hashes).
#pragma once

#include <string_view>

#include "ops/registry.h"
#include "util/bytes.h"

namespace zc::ops {

void write_meta(ByteWriter& w, const TensorMeta& m, bool sizes = true);

// Raises zc::Error "<what>: ..." naming the field that no writer produces: a dtype zc does not
// have, a device type other than cpu (0) or cuda (1), a device index outside 0..63 (or other
// than 0 on the CPU), a flag other than 0 or 1, a rank above 64, a size outside 0..2^48.
// Truncation is the reader's own error.
TensorMeta read_meta(ByteReader& r, std::string_view what);

}  // namespace zc::ops
