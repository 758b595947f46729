#include "lowering/conv.h"

#include "ir/error.h"

namespace lt {

void validate_conv(const ConvStep& c, int64_t a_numel, int64_t b_numel, int64_t bias_numel,
                   int64_t out_numel, const char* where) {
  auto bad = [&](const std::string& why) {
    fail(ErrorKind::Runtime, where, ": conv ", c.name, " (input ", shape_str(c.x), ", weight ",
         shape_str(c.w), "): ", why);
  };
  Shape y;
  try {
    y = conv_output_shape(c.op(), c.x, c.w, c.params);
  } catch (const Error& e) {
    bad(e.what());
  }
  if (y != c.y) bad("output " + shape_str(c.y) + " does not match the geometry");
  const Shape *sa = &c.x, *sb = &c.w, *so = &c.y;
  if (c.kind == ConvStep::Kind::GradInput) sa = &c.y, sb = &c.w, so = &c.x;
  if (c.kind == ConvStep::Kind::GradWeight) sa = &c.x, sb = &c.y, so = &c.w;
  if (numel(*sa) != a_numel || numel(*sb) != b_numel || numel(*so) != out_numel)
    bad("operand buffers have the wrong sizes");
  if (c.kind != ConvStep::Kind::Forward && (c.bias >= 0 || c.relu))
    bad("bias or relu on a backward step");
  if (c.bias >= 0 && bias_numel != c.w[0]) bad("bias buffer has the wrong size");
  if (c.channels_last > 7) bad("channels-last bits beyond its three operands");
}

}  // namespace lt
