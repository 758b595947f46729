// A plan's collective step (lowering/collective.h) on host memory, through the default process
// group's communicator (distributed/process_group.h): what the CPU backend runs for each one; the
// reference interpreter asks communicator_for too.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "lowering/collective.h"

namespace lt {

// The default group's communicator, checked for a collective `op` traced for a group of `world`
// ranks: an lt::Error when no group is initialized or its size differs.
std::shared_ptr<dist::Communicator> communicator_for(Op op, int world);

// A collective step in two halves, the second for another thread. in: the step's operand (count
// elements), out: its result (count, or count x world for all_gather); distinct buffers. prepare
// checks the group and copies the operand into the result (all_gather: into this rank's slot);
// finish runs the collective in place on the result alone. Both throw lt::Error
// (communicator_for's, or the communicator's when a peer fails or times out).
void prepare_host_collective(const CollectiveStep& step, const void* in, void* out);
void finish_host_collective(const CollectiveStep& step, void* out);

// A call group's all_reduces (same_engine_call, lowering/collective.h) as one engine call, in two
// halves as above: prepare packs every operand into one buffer (returned; each operand's memory is
// free again once it returns), finish reduces that buffer in place and copies each step's part into
// its result.
std::shared_ptr<std::vector<char>> prepare_host_call(
    const std::vector<const CollectiveStep*>& steps, const std::vector<const void*>& ins);
void finish_host_call(const std::vector<const CollectiveStep*>& steps, std::vector<char>& packed,
                      const std::vector<void*>& outs);

// What a plan's collectives are (ops, dtypes, sizes, groups, in order), as one number, and in
// words for messages.
uint64_t collectives_signature(const std::vector<CollectiveStep>& steps);
std::string describe_collectives(const std::vector<CollectiveStep>& steps);

// Collective: every rank gives the signature of the graph it is about to run; an lt::Error on
// every rank when they differ (ranks that sync different graphs would otherwise exchange
// mismatched data or wait out the timeout).
void check_same_collectives(const std::vector<CollectiveStep>& steps);

}  // namespace lt
