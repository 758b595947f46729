// Library steps in fusion (lowering/fuse.cc): where the backend's libraries compute a prim (GEMM,
// convolution, attention), a plan step over buffers replaces loop kernels. Each kind is a matcher,
// a function that looks at one prim and returns the step found there, if any, and an emitter that
// adds the step to a plan once buffers are known; fuse() tries the matchers in table order
// (kLibraryKinds). Internal to lowering.
#pragma once
#include <iosfwd>
#include <optional>
#include <vector>

#include "lowering/fusion_node.h"
#include "lowering/gemm_match.h"
#include "lowering/plan.h"

namespace lt::fusion {

// A library step found at a prim.
struct LibraryMatch {
  PlanStep::Kind kind;
  int prim = -1;  // the prim matched (GEMM: its ReduceSum; conv: the conv; attention: the first)
  // The node whose buffer the step writes, where the step runs in the plan: prim, or (GEMM, conv)
  // its only user when that user is computed by the step too (an output reshape, a transpose, a
  // ReLU post-op).
  int root = -1;
  std::vector<int> operands;  // nodes the step reads: each gets a buffer
  std::vector<int> outputs;   // nodes the step writes (root among them): buffers, no kernels
  GemmMatch gemm;             // GEMM: the product (buffers and name set when emitted)
  bool relu = false;          // conv: the root is a ReLU applied as a post-op
  int table = -1;             // its kind's row of kLibraryKinds (which emitter adds it)
};

// What a matcher sees: the graph, the backend's capabilities and fusion's state so far (earlier
// matches' operands are realized).
struct MatchContext {
  const PrimGraph& g;
  const LowerOptions& opts;
  const FusionNodes& nodes;
};

// The matchers (gemm_match.cc, conv_match.cc, attention_match.cc). A prim of a library class that
// the backend cannot run there (a conv or attention dtype it lacks) is an lt::Error: the runtime
// expands those before lowering.
std::optional<LibraryMatch> match_gemm_step(const MatchContext& c, int node);
std::optional<LibraryMatch> match_conv_step(const MatchContext& c, int node);
std::optional<LibraryMatch> match_attention_step(const MatchContext& c, int node);
std::optional<LibraryMatch> match_collective_step(const MatchContext& c, int node);
std::optional<LibraryMatch> match_concat_step(const MatchContext& c, int node);

// The emitters: append the match's step to plan.steps and its step list, and a line describing it
// to `grouping`. Node buffers are nodes[i].buffer.
void emit_gemm_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes, Plan& plan,
                    std::ostream& grouping);
void emit_conv_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes, Plan& plan,
                    std::ostream& grouping);
void emit_attention_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                         Plan& plan, std::ostream& grouping);
void emit_collective_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                          Plan& plan, std::ostream& grouping);
// A concat adds no step of its own: its operands' buffers become ranges of its result, or copy
// kernels put them there.
void emit_concat_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                      Plan& plan, std::ostream& grouping);

struct LibraryKind {
  PlanStep::Kind kind;
  std::optional<LibraryMatch> (*match)(const MatchContext&, int node);
  void (*emit)(const PrimGraph&, const LibraryMatch&, const FusionNodes&, Plan&, std::ostream&);
};

// In the order they are tried: each runs over every prim (in node order) before the next, so a
// GEMM's operands are realized before a conv or attention is matched, and a concat's operands
// (last) are the library steps' results where those write them. A node an earlier match writes is
// not offered again. `kind` is the plan step a match adds (a concat's: copy kernels, if any).
inline constexpr LibraryKind kLibraryKinds[] = {
    {PlanStep::Kind::Gemm, match_gemm_step, emit_gemm_step},
    {PlanStep::Kind::Conv, match_conv_step, emit_conv_step},
    {PlanStep::Kind::Attention, match_attention_step, emit_attention_step},
    {PlanStep::Kind::Collective, match_collective_step, emit_collective_step},
    {PlanStep::Kind::Kernel, match_concat_step, emit_concat_step},
};

// Runs the matchers over g and applies each match as it is found (its operands and outputs are
// realized; nodes[o].library is set on its outputs). Returns the matches, indexed by
// FusionNode::library.
std::vector<LibraryMatch> match_library_steps(const PrimGraph& g, const LowerOptions& opts,
                                              FusionNodes& nodes);
// Appends match m's step (see the emitters).
void emit_library_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                       Plan& plan, std::ostream& grouping);

}  // namespace lt::fusion
