// What train_mlp.cpp and train_ddp.cpp share: the synthetic classification task (points in R^16
// labelled by a fixed random linear "teacher" over 4 classes, which an MLP learns to near-perfect
// accuracy) and their command line.
#pragma once
#include <lazytensor/lazytensor.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace teacher_task {

constexpr int kDim = 16, kClasses = 4;

struct Data {
  std::vector<float> x;    // [n, kDim]
  std::vector<int64_t> y;  // [n]
};

// The teacher's weights [kDim, kClasses].
inline std::vector<float> make_teacher(std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> teacher(kDim * kClasses);
  for (auto& v : teacher) v = nd(rng);
  return teacher;
}

// n points; labels come from argmax(x @ teacher).
inline Data make_data(int n, std::mt19937& rng, const std::vector<float>& teacher) {
  std::normal_distribution<float> nd;
  Data d{std::vector<float>(static_cast<size_t>(n) * kDim), std::vector<int64_t>(n)};
  for (auto& v : d.x) v = nd(rng);
  for (int i = 0; i < n; ++i) {
    float best = -1e30f;
    for (int c = 0; c < kClasses; ++c) {
      float s = 0;
      for (int k = 0; k < kDim; ++k) s += d.x[i * kDim + k] * teacher[k * kClasses + c];
      if (s > best) best = s, d.y[i] = c;
    }
  }
  return d;
}

// The fraction of `data` that `model` classifies right (its forward under no_grad on `dev`).
template <typename Model>
double accuracy(Model& model, const Data& data, const lt::Device& dev) {
  lt::NoGradGuard ng;
  const int n = static_cast<int>(data.y.size());
  lt::Tensor logits = model(lt::from_host(data.x.data(), lt::DType::Float32, {n, kDim}, dev));
  auto l = logits.to_vector<float>();
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < kClasses; ++c)
      if (l[i * kClasses + c] > l[i * kClasses + best]) best = c;
    correct += best == data.y[i];
  }
  return static_cast<double>(correct) / n;
}

struct Options {
  std::string device = "lazy";
  int steps = 200;
};

// --device D and --steps N; false, with `usage` printed, for anything else.
inline bool parse_options(int argc, char** argv, const char* usage, Options& o) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      o.device = argv[++i];
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
      o.steps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s\n", usage);
      return false;
    }
  }
  return true;
}

}  // namespace teacher_task
