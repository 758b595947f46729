#include <algorithm>
#include <cstdint>

#include "backends/backend.h"
#include "ir/error.h"

namespace lt {

std::vector<int> donated_outputs(const std::vector<BufferSpec>& buffers,
                                 const std::vector<Donation>& donations,
                                 const std::vector<RunInput>& inputs, const char* who) {
  std::vector<int> into(buffers.size(), -1);
  // The (output buffer, run input) pairs the plan allows, sorted for lookup: scanning every
  // donation for every donated input was quadratic in a training step's hundreds of donations.
  std::vector<uint64_t> pairs;
  for (const Donation& d : donations)
    if (d.output >= 0 && d.input >= 0 && d.input < static_cast<int>(buffers.size()) &&
        buffers[d.input].kind == BufferSpec::Kind::Input && buffers[d.input].input >= 0)
      pairs.push_back(static_cast<uint64_t>(d.output) << 32 |
                      static_cast<uint32_t>(buffers[d.input].input));
  std::sort(pairs.begin(), pairs.end());
  for (size_t j = 0; j < inputs.size(); ++j) {
    const int o = inputs[j].donated_output;
    if (o < 0) continue;
    const bool allowed = j <= UINT32_MAX && std::binary_search(pairs.begin(), pairs.end(),
                                                               static_cast<uint64_t>(o) << 32 |
                                                                   static_cast<uint32_t>(j));
    if (!allowed)
      fail(ErrorKind::Runtime, who, ": input ", j, " is donated to buffer ", o,
           ", which the plan does not pair with it (Plan::donations)");
    if (into[o] >= 0)
      fail(ErrorKind::Runtime, who, ": buffer ", o, " is donated twice (inputs ", into[o], " and ",
           j, ")");
    const size_t bytes = static_cast<size_t>(buffers[o].numel) * dtype_size(buffers[o].dtype);
    if (!inputs[j].buffer || inputs[j].buffer->bytes() < bytes)
      fail(ErrorKind::Runtime, who, ": donated input ", j, " has no buffer of ", bytes, " bytes");
    into[o] = static_cast<int>(j);
  }
  return into;
}

}  // namespace lt
