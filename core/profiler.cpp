#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <initializer_list>
#include <string_view>
#include <unordered_map>

#include "core/error.h"

namespace tapestry {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Rows of one phase, found by name without building a string: the keys view the rows' own names,
// which a deque never moves.
struct RowSet {
  ProfilePhase phase;
  std::deque<ProfileRow> rows;
  std::unordered_map<std::string_view, ProfileRow*> by_name;

  ProfileRow& operator[](std::string_view name) {
    const auto found = by_name.find(name);
    if (found != by_name.end()) return *found->second;
    rows.push_back({std::string(name), phase, 0, 0, 0, 0, 0});
    ProfileRow& row = rows.back();
    by_name.emplace(std::string_view(row.name), &row);
    return row;
  }
};

// An interval kept for the timeline; the row names it.
struct Interval {
  const ProfileRow* row;
  bool scope;
  double start_us, duration_us;
};

thread_local Profiler::State* active_state = nullptr;

}  // namespace

struct Profiler::State {
  Device device;
  Trace trace;
  Clock::time_point origin = Clock::now();
  Clock::time_point last;           // the latest boundary
  Clock::time_point session_start;
  double seconds = 0;
  int64_t sessions = 0;
  RowSet forward{ProfilePhase::Forward, {}, {}}, backward{ProfilePhase::Backward, {}, {}},
      outside{ProfilePhase::Outside, {}, {}}, scopes{ProfilePhase::Outside, {}, {}};
  std::vector<const char*> scope_names;  // the open scopes, innermost last
  std::vector<Clock::time_point> scope_starts;
  double pending_flops = 0;   // reported since the latest boundary
  int64_t pending_bytes = 0;  // allocated since the latest boundary
  int backward_depth = 0;
  int views = 0;  // open profile_hooks::View scopes
  Clock::time_point pass_start, closure_start;
  double closure_seconds = 0;  // this pass's closures
  std::vector<Interval> events;
  int64_t events_dropped = 0;

  // Memory at the peak (profiler.h): the blocks this session allocated and still holds, each with
  // the row of the interval that allocated it (null while that interval is open).
  struct Block {
    ProfileRow* row;
    int64_t bytes;
  };
  std::unordered_map<const void*, Block> held;
  std::vector<const void*> unattributed;  // blocks allocated since the latest boundary
  std::unordered_map<ProfileRow*, int64_t> held_by_row;
  int64_t live = 0, attributed = 0;  // bytes of `held`, and of those with a row
  int64_t session_peak = 0;          // the most `live` reached in this session
  std::unordered_map<ProfileRow*, int64_t> session_peak_rows;  // held_by_row at that moment
  int64_t peak_unattributed = 0;     // bytes at that moment whose interval was still open
  int64_t peak = 0;                  // the highest session's peak

  State(Device d, Trace t) : device(d), trace(t) {}

  // The blocks allocated in the interval that just ended are `row`'s, and so is their part of a
  // peak reached during it.
  void attribute(ProfileRow& row) {
    for (const void* block : unattributed) {
      const auto it = held.find(block);
      if (it == held.end() || it->second.row) continue;  // freed already, or listed twice
      it->second.row = &row;
      held_by_row[&row] += it->second.bytes;
      attributed += it->second.bytes;
    }
    unattributed.clear();
    if (peak_unattributed > 0) session_peak_rows[&row] += peak_unattributed;
    peak_unattributed = 0;
  }

  // At a session's end: keep its peak if it is the highest, and forget its blocks.
  void close_memory() {
    if (session_peak > peak) {
      peak = session_peak;
      for (RowSet* set : {&forward, &backward, &outside})
        for (ProfileRow& row : set->rows) row.peak_bytes = 0;
      for (const auto& [row, bytes] : session_peak_rows) row->peak_bytes = bytes;
    }
    held.clear();
    unattributed.clear();
    held_by_row.clear();
    session_peak_rows.clear();
    live = attributed = session_peak = peak_unattributed = 0;
  }

  // The clock at a boundary; on a GPU after the queued kernels have run, so they count where queued.
  Clock::time_point now() const {
    if (device.is_cuda()) context(device).synchronize();
    return Clock::now();
  }

  void keep(const ProfileRow& row, bool scope, Clock::time_point from, Clock::time_point to) {
    if (trace == Trace::Skip) return;
    if (static_cast<int64_t>(events.size()) >= kMaxEvents) {
      ++events_dropped;
      return;
    }
    events.push_back({&row, scope, seconds_between(origin, from) * 1e6, seconds_between(from, to) * 1e6});
  }

  // Charges [from, to] and what was reported meanwhile to `row`.
  void charge(ProfileRow& row, Clock::time_point from, Clock::time_point to) {
    ++row.calls;
    row.seconds += seconds_between(from, to);
    row.flops += pending_flops;
    row.bytes += pending_bytes;
    pending_flops = 0;
    pending_bytes = 0;
    attribute(row);
    keep(row, false, from, to);
  }

  // A boundary that no op reported: the interval up to it was outside ops.
  void boundary() {
    const Clock::time_point t = now();
    charge(outside[scope_names.empty() ? "(outside ops)" : scope_names.back()], last, t);
    last = t;
  }
};

const char* to_string(ProfilePhase phase) {
  switch (phase) {
    case ProfilePhase::Forward: return "forward";
    case ProfilePhase::Backward: return "backward";
    case ProfilePhase::Outside: return "outside";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Profiler, sessions, scopes

Profiler::Profiler(Device device, Trace trace) : state_(std::make_unique<State>(device, trace)) {}
Profiler::~Profiler() = default;

namespace {
// The rows of `sets`, longest total first.
std::vector<ProfileRow> longest_first(std::initializer_list<const RowSet*> sets) {
  std::vector<ProfileRow> out;
  for (const RowSet* set : sets) out.insert(out.end(), set->rows.begin(), set->rows.end());
  std::stable_sort(out.begin(), out.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return out;
}
}  // namespace

ProfileReport Profiler::report() const {
  const State& s = *state_;
  ProfileReport r;
  r.seconds = s.seconds;
  r.sessions = s.sessions;
  r.rows = longest_first({&s.forward, &s.backward, &s.outside});
  r.scopes = longest_first({&s.scopes});
  for (const Interval& e : s.events)
    r.events.push_back({e.row->name, e.scope ? "scope" : to_string(e.row->phase), e.start_us, e.duration_us});
  r.events_dropped = s.events_dropped;
  r.peak_bytes = s.peak;
  return r;
}

ProfileSession::ProfileSession(Profiler& profiler) : state_(profiler.state_.get()) {
  TP_CHECK(!active_state, "ProfileSession", "a profiling session is already active on this thread");
  active_state = state_;
  state_->session_start = state_->last = state_->now();
  ++state_->sessions;
}

ProfileSession::~ProfileSession() {
  state_->boundary();
  state_->close_memory();
  state_->seconds += seconds_between(state_->session_start, state_->last);
  active_state = nullptr;
}

ProfileScope::ProfileScope(const char* name) : state_(active_state) {
  if (!state_) return;
  state_->boundary();
  state_->scope_names.push_back(name);
  state_->scope_starts.push_back(state_->last);
}

ProfileScope::~ProfileScope() {
  if (!state_) return;
  Profiler::State& s = *state_;
  s.boundary();  // charged to this scope, still the innermost
  ProfileRow& row = s.scopes[s.scope_names.back()];
  ++row.calls;
  row.seconds += seconds_between(s.scope_starts.back(), s.last);
  s.keep(row, true, s.scope_starts.back(), s.last);
  s.scope_names.pop_back();
  s.scope_starts.pop_back();
}

void profile_flops(double flops) {
  if (active_state) active_state->pending_flops += flops;
}

// ---------------------------------------------------------------------------------------------
// Hooks

namespace profile_hooks {

Profiler::State* active() { return active_state; }

void op_reported(Profiler::State& s, const char* op) {
  if (s.backward_depth > 0) return;  // part of a closure or of the pass, timed as such
  if (s.views > 0) return;           // a view: its time goes to the next op
  const Clock::time_point t = s.now();
  s.charge(s.forward[op], s.last, t);
  s.last = t;
}

View::View() : state_(active_state) {
  if (state_) ++state_->views;
}

View::~View() {
  if (state_) --state_->views;
}

void allocated(Profiler::State& s, std::size_t nbytes, const void* block) {
  const auto bytes = static_cast<int64_t>(nbytes);
  s.pending_bytes += bytes;
  s.held[block] = {nullptr, bytes};
  s.unattributed.push_back(block);
  s.live += bytes;
  if (s.live > s.session_peak) {  // a new peak: who holds what now (the open interval's part later)
    s.session_peak = s.live;
    s.session_peak_rows.clear();
    for (const auto& [row, held] : s.held_by_row)
      if (held > 0) s.session_peak_rows.emplace(row, held);
    s.peak_unattributed = s.live - s.attributed;
  }
}

void released(Profiler::State& s, const void* block) {
  const auto it = s.held.find(block);
  if (it == s.held.end()) return;  // allocated before the session
  s.live -= it->second.bytes;
  if (it->second.row) {
    s.held_by_row[it->second.row] -= it->second.bytes;
    s.attributed -= it->second.bytes;
  }
  s.held.erase(it);
}

BackwardPass::BackwardPass(Profiler::State* state) : state_(state) {
  if (!state_) return;
  if (state_->backward_depth++ > 0) return;
  state_->boundary();
  state_->pass_start = state_->last;
  state_->closure_seconds = 0;
}

// The pass's own work (what no closure did) goes to "(autograd)": its time, and what it allocated.
BackwardPass::~BackwardPass() {
  if (!state_ || --state_->backward_depth > 0) return;
  Profiler::State& s = *state_;
  const Clock::time_point t = s.now();
  ProfileRow& row = s.backward["(autograd)"];
  ++row.calls;
  row.seconds += seconds_between(s.pass_start, t) - s.closure_seconds;
  row.bytes += s.pending_bytes;
  row.flops += s.pending_flops;
  s.pending_bytes = 0;
  s.pending_flops = 0;
  s.attribute(row);
  s.keep(row, false, s.pass_start, t);
  s.last = t;
}

void BackwardPass::closure_began() {
  if (!state_) return;
  Profiler::State& s = *state_;
  ProfileRow& pass = s.backward["(autograd)"];
  pass.bytes += s.pending_bytes;
  s.pending_bytes = 0;
  s.attribute(pass);
  s.closure_start = s.now();
}

void BackwardPass::closure_ended(const std::string& op) {
  if (!state_) return;
  Profiler::State& s = *state_;
  const Clock::time_point t = s.now();
  s.charge(s.backward[op], s.closure_start, t);
  s.closure_seconds += seconds_between(s.closure_start, t);
}

}  // namespace profile_hooks

// ---------------------------------------------------------------------------------------------
// Output

namespace {

double share(const ProfileRow& row, double total) { return total > 0 ? row.seconds / total : 0; }
double gflops_per_second(const ProfileRow& row) { return row.seconds > 0 ? row.flops / row.seconds * 1e-9 : 0; }

// One line of the table; `phase`: the row's, or "scope".
std::string line(const ProfileRow& row, const char* phase, double total, int width) {
  char text[256];
  const double mib = static_cast<double>(row.bytes) / (1 << 20);
  const double peak_mib = static_cast<double>(row.peak_bytes) / (1 << 20);
  std::snprintf(text, sizeof text, "%-*s  %-8s %8lld %10.2f %10.1f %5.1f%% %9.3f %8.1f %9.1f %8.1f\n", width,
                row.name.c_str(), phase, static_cast<long long>(row.calls),
                row.seconds * 1e3, row.seconds * 1e6 / static_cast<double>(std::max<int64_t>(row.calls, 1)),
                100 * share(row, total), row.flops * 1e-9, gflops_per_second(row), mib, peak_mib);
  return text;
}

}  // namespace

std::string to_table(const ProfileReport& report) {
  int width = 5;
  for (const ProfileRow& row : report.rows) width = std::max(width, static_cast<int>(row.name.size()));
  for (const ProfileRow& row : report.scopes) width = std::max(width, static_cast<int>(row.name.size()));
  char head[512];
  std::snprintf(head, sizeof head,
                "profile: %.3f s in %lld session(s); at the peak, %.1f MiB held by blocks allocated in one session "
                "(MiB peak: each row's part)\n%-*s  %-8s %8s %10s %10s %6s %9s %8s %9s %8s\n",
                report.seconds, static_cast<long long>(report.sessions),
                static_cast<double>(report.peak_bytes) / (1 << 20), width, "op", "phase", "calls", "total ms",
                "mean us", "share", "GFLOP", "GFLOP/s", "MiB alloc", "MiB peak");
  std::string out = head;
  for (const ProfileRow& row : report.rows) out += line(row, to_string(row.phase), report.seconds, width);
  if (!report.scopes.empty()) out += "scopes (each from its start to its end, the ops inside included):\n";
  for (const ProfileRow& row : report.scopes) out += line(row, "scope", report.seconds, width);
  return out;
}

nlohmann::json to_json(const ProfileReport& report) {
  // `phase`: the rows' own when null.
  const auto rows = [&](const std::vector<ProfileRow>& list, const char* phase) {
    nlohmann::json out = nlohmann::json::array();
    for (const ProfileRow& row : list)
      out.push_back({{"name", row.name},
                     {"phase", phase ? phase : to_string(row.phase)},
                     {"calls", row.calls},
                     {"seconds", row.seconds},
                     {"mean_seconds", row.seconds / static_cast<double>(std::max<int64_t>(row.calls, 1))},
                     {"share", share(row, report.seconds)},
                     {"flops", row.flops},
                     {"gflops_per_second", gflops_per_second(row)},
                     {"bytes", row.bytes},
                     {"peak_bytes", row.peak_bytes}});
    return out;
  };
  return {{"seconds", report.seconds},
          {"sessions", report.sessions},
          {"rows", rows(report.rows, nullptr)},
          {"scopes", rows(report.scopes, "scope")},
          {"events_dropped", report.events_dropped},
          {"peak_bytes", report.peak_bytes}};
}

nlohmann::json to_chrome_trace(const ProfileReport& report) {
  nlohmann::json events = nlohmann::json::array();
  for (const ProfileEvent& e : report.events)
    events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"ts", e.start_us},
                      {"dur", e.duration_us}, {"pid", 0}, {"tid", 0}});
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace tapestry
