#include "zc/quantize.h"

#include <algorithm>
#include <functional>

#include "zc/error.h"

namespace zc {

QuantizeReport quantize(nn::Module& module, const QuantizeOptions& options) {
  std::vector<std::pair<std::string, nn::Linear*>> linears;
  std::function<void(const std::string&, nn::Module&)> walk = [&](const std::string& name,
                                                                  nn::Module& m) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) linears.emplace_back(name, l);
    for (const auto& [child, sub] : m.named_children())
      walk(name.empty() ? child : name + "." + child, *sub);
  };
  walk("", module);
  for (const std::string& s : options.skip) {
    if (std::none_of(linears.begin(), linears.end(), [&](const auto& l) { return l.first == s; }))
      throw Error("zc::quantize: skip names '" + s + "', which is not an nn::Linear of the module");
  }
  QuantizeReport report;
  for (auto& [name, linear] : linears) {
    if (linear->quantized() ||
        std::find(options.skip.begin(), options.skip.end(), name) != options.skip.end())
      continue;
    report.bytes_before +=
        linear->weight.numel() * static_cast<int64_t>(dtype_size(linear->weight.dtype()));
    linear->quantize_int8();
    report.bytes_after +=
        linear->weight.numel() + linear->weight_scale.numel() *
                                     static_cast<int64_t>(dtype_size(linear->weight_scale.dtype()));
    ++report.layers;
  }
  return report;
}

}  // namespace zc
