#include "lowering/size_choices.h"

#include "ir/error.h"

namespace lt {
namespace {

struct Session {
  enum class Mode { Off, Record, Replay } mode = Mode::Off;
  std::vector<bool> choices;
  size_t next = 0;
};

// Per thread: lowerings on other threads (the runtime compiles on the syncing thread) are apart.
thread_local Session t_session;

}  // namespace

bool size_choice(bool here) {
  Session& s = t_session;
  switch (s.mode) {
    case Session::Mode::Off:
      return here;
    case Session::Mode::Record:
      s.choices.push_back(here);
      return here;
    case Session::Mode::Replay:
      LT_CHECK(s.next < s.choices.size(), ErrorKind::Runtime,
               "symbolic lowering: the plan asks for more size choices than were recorded");
      return s.choices[s.next++];
  }
  return here;
}

bool size_choices_active() { return t_session.mode != Session::Mode::Off; }

SizeChoiceRecording::SizeChoiceRecording() { t_session = {Session::Mode::Record, {}, 0}; }
SizeChoiceRecording::~SizeChoiceRecording() { t_session = {}; }
std::vector<bool> SizeChoiceRecording::choices() const { return t_session.choices; }

SizeChoiceReplay::SizeChoiceReplay(std::vector<bool> choices) {
  t_session = {Session::Mode::Replay, std::move(choices), 0};
}
SizeChoiceReplay::~SizeChoiceReplay() { t_session = {}; }

}  // namespace lt
