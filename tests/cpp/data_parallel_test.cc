// lt::nn::DistributedDataParallel (nn/data_parallel.h). Groups of 2 and 3 dist_worker processes
// (dist_worker_ddp.cc) train ddp_mlp.h's model on lazy:cpu, each rank from initial weights of its
// own on its shard of each batch; this process trains the same model in one process on the whole
// batch from rank 0's initial weights, and every rank must end with those parameters (the
// broadcast, the bucketed averaging). Also: no_sync keeps local gradients, every step of the
// training is one graph compiled once, and a process group is required. Each run draws its seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ddp_mlp.h"
#include "dist_group.h"
#include "test_util.h"

namespace lt_ddp_test {
namespace {

using lt_dist_test::first_ranks;
using lt_dist_test::GroupRun;
using lt_dist_test::has;
using lt_dist_test::run_group;
using Values = std::map<std::string, std::vector<double>>;

const lt::Device& kDev = lt::testing::kLazyCpu;

// A rank's "<tag> <name> <values>" lines (ddp_mlp.h's print_tensors).
Values parse(const std::string& output, const std::string& tag) {
  Values v;
  std::istringstream is(output);
  std::string line;
  while (std::getline(is, line)) {
    std::istringstream ls(line);
    std::string t, name, num;
    if (!(ls >> t >> name) || t != tag) continue;
    auto& vals = v[name];
    while (ls >> num) vals.push_back(std::strtod(num.c_str(), nullptr));
  }
  return v;
}

Values values_of(const lt::nn::NamedTensors& named) {
  Values v;
  for (const auto& [name, t] : named) v[name] = t.to_vector<double>();
  return v;
}

// Every entry of `want` in `got`, within tol relative to 1 + |want|.
void expect_near(const Values& got, const Values& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": no " << name;
    ASSERT_EQ(it->second.size(), w.size()) << what << ": " << name;
    for (size_t i = 0; i < w.size(); ++i)
      ASSERT_NEAR(it->second[i], w[i], tol * (1 + std::fabs(w[i])))
          << what << ": " << name << "[" << i << "]";
  }
}

double max_difference(const Values& a, const Values& b) {
  double d = 0;
  for (const auto& [name, va] : a)
    for (size_t i = 0; i < va.size(); ++i) d = std::max(d, std::fabs(va[i] - b.at(name)[i]));
  return d;
}

uint32_t random_seed() { return std::random_device{}() % 1000000; }

// `world` ranks, `kSteps` SGD steps with DDP, against one process on the whole batch.
void trains_like_one_process(int world, double bucket_cap_mb, size_t buckets) {
  constexpr int kSteps = 4;
  const uint32_t seed = random_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::ostringstream cap;
  cap << bucket_cap_mb;
  GroupRun run = run_group("ddp_train", world, first_ranks(world), std::chrono::seconds(180),
                           {std::to_string(seed), std::to_string(kSteps), cap.str()});
  ASSERT_FALSE(run.timed_out) << run.report();

  // The ranks' own initial weights differ: only the broadcast makes them start alike.
  const Values rank0 = values_of(Mlp(init_seed(seed, 0), kDev).state_dict());
  ASSERT_GT(max_difference(rank0, values_of(Mlp(init_seed(seed, 1), kDev).state_dict())), 1e-2);
  Mlp one(init_seed(seed, 0), kDev);
  train(one, seed, kSteps, 0, kBatch, kDev);
  const Values want = values_of(one.state_dict());
  ASSERT_GT(max_difference(want, rank0), 1e-3);  // the steps moved the weights

  for (const auto& r : run.ranks) {
    ASSERT_EQ(r.exit_code, 0) << run.report();
    EXPECT_TRUE(has(r.output, "BUCKETS " + std::to_string(buckets) + "\n")) << run.report();
    // The first step's graph is the later steps' graph: one compile, then cache hits.
    EXPECT_TRUE(has(r.output, "COMPILES 1 HITS " + std::to_string(kSteps - 1) + "\n"))
        << run.report();
    expect_near(parse(r.output, "PARAM"), want, 1e-5, "rank " + std::to_string(r.rank));
  }
}

TEST(DistributedDataParallel, TwoRanksTrainLikeOneProcessOnTheWholeBatch) {
  SKIP_WITHOUT_GLOO();
  trains_like_one_process(2, 25, 1);  // one bucket, two dtype groups (float32, float64)
}

// DDP's other ways of averaging a bucket (lt::distributed::ddp_reduce_mode: each gradient alone,
// the large ones alone and the small ones flattened, or the whole bucket flattened; the call
// group, Gloo's default, is the tests above), over Gloo; the ranks inherit the variable.
TEST(DistributedDataParallel, TwoRanksInTheOtherReduceModesTrainLikeOneProcess) {
  SKIP_WITHOUT_GLOO();
  for (const char* mode : {"per_tensor", "mixed", "flat"}) {
    SCOPED_TRACE(mode);
    ::setenv("LT_DDP_REDUCE", mode, 1);
    trains_like_one_process(2, 25, 1);
    ::unsetenv("LT_DDP_REDUCE");
  }
}

// 1e-4 MB (104 bytes) is below every parameter but the 3-element ones, so no two share a
// bucket: five buckets, five all_reduces in the step's graph.
TEST(DistributedDataParallel, ThreeRanksWithABucketPerParameterTrainLikeOneProcess) {
  SKIP_WITHOUT_GLOO();
  trains_like_one_process(3, 1e-4, 5);
}

// A backward under no_sync leaves each rank its own shard's gradients; the next backward averages
// the sum of both passes' gradients, the whole batches' gradients of one process.
TEST(DistributedDataParallel, NoSyncKeepsLocalGradientsUntilTheNextSyncedBackward) {
  SKIP_WITHOUT_GLOO();
  constexpr int kWorld = 3;
  const uint32_t seed = random_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  GroupRun run = run_group("ddp_no_sync", kWorld, first_ranks(kWorld), std::chrono::seconds(180),
                           {std::to_string(seed)});
  ASSERT_FALSE(run.timed_out) << run.report();

  Mlp whole(init_seed(seed, 0), kDev);
  loss_backward(whole, seed, 0, 0, kBatch, kDev);
  loss_backward(whole, seed, 1, 0, kBatch, kDev);
  const Values averaged = values_of(grads_of(whole));
  std::vector<Values> local;
  for (int r = 0; r < kWorld; ++r) {
    Mlp m(init_seed(seed, 0), kDev);
    auto [lo, hi] = shard(r, kWorld);
    loss_backward(m, seed, 0, lo, hi, kDev);
    local.push_back(values_of(grads_of(m)));
  }
  ASSERT_GT(max_difference(local[0], local[1]), 1e-3);  // averaging them would show

  for (const auto& r : run.ranks) {
    ASSERT_EQ(r.exit_code, 0) << run.report();
    const std::string who = "rank " + std::to_string(r.rank);
    expect_near(parse(r.output, "GA"), local[static_cast<size_t>(r.rank)], 1e-5, who + " no_sync");
    expect_near(parse(r.output, "GB"), averaged, 1e-5, who + " synced");
  }
}

TEST(DistributedDataParallel, NeedsAProcessGroup) {
  ASSERT_FALSE(lt::distributed::is_initialized());
  try {
    lt::nn::DistributedDataParallel ddp(std::make_shared<Mlp>(1, kDev));
    ADD_FAILURE() << "constructed without a process group";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.kind(), lt::ErrorKind::Value);
    EXPECT_STREQ(e.what(),
                 "Default process group has not been initialized, please make sure to call "
                 "init_process_group.");
  }
}

}  // namespace
}  // namespace lt_ddp_test
