// Choices of lowering that depend on sizes but not on what the plan computes: which value a
// fusion heuristic realizes, whether a long reduction is split in two. Lowering for symbolic
// sizes (lowering/generalize.h) lowers one program at several sizes and needs the plans to agree
// in structure; so there each choice is made once, at the current sizes, and replayed at the
// others, as torch's ShapeEnv decides heuristics on its size hints. Outside such a session every
// choice is made where it stands. Choices that would change the plan's results must not go
// through here (lowering/README.md): lowering has none.
#pragma once
#include <cstddef>
#include <vector>

namespace lt {

// `here`, the choice at the sizes being lowered; in a replay, the choice the recording made.
bool size_choice(bool here);

// Whether a recording or replay is active (a split reduction's chunk count is a divisor of its
// length, no polynomial of it: symbolic lowering leaves reductions whole).
bool size_choices_active();

// Records the choices made while it lives.
class SizeChoiceRecording {
 public:
  SizeChoiceRecording();
  ~SizeChoiceRecording();
  SizeChoiceRecording(const SizeChoiceRecording&) = delete;
  SizeChoiceRecording& operator=(const SizeChoiceRecording&) = delete;
  std::vector<bool> choices() const;
};

// Replays `choices` in order while it lives; a lowering that asks for more choices than were
// recorded (another structure) throws lt::Error.
class SizeChoiceReplay {
 public:
  explicit SizeChoiceReplay(std::vector<bool> choices);
  ~SizeChoiceReplay();
  SizeChoiceReplay(const SizeChoiceReplay&) = delete;
  SizeChoiceReplay& operator=(const SizeChoiceReplay&) = delete;
};

}  // namespace lt
