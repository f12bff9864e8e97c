// prepare_concurrently (runtime/prepare_concurrently.h).
#include "runtime/prepare_concurrently.h"

#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace tilejit::runtime {

void prepare_concurrently(std::span<const PrepareJob> jobs, const LaunchConfig &cfg) {
  std::vector<PrepareJob> todo;
  for (const PrepareJob &j : jobs)
    if (!j.kernel->prepared(cfg, j.args)) todo.push_back(j);
  if (todo.empty()) return;
  // Traced here, one after another: the user's functions a trace calls (a score_mod, a mask) are never run
  // on two threads at once. Only codegen, the driver's link and the load go to the threads.
  for (const PrepareJob &j : todo) j.kernel->function(j.args);
  std::vector<std::exception_ptr> errors(todo.size());
  auto prepare = [&](size_t i) {
    try {
      todo[i].kernel->prepare(cfg, todo[i].args);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  size_t started = 1;
  try {
    for (; started < todo.size(); ++started) threads.emplace_back(prepare, started);
  } catch (const std::system_error &) {
    // No thread to be had: the rest run here.
  }
  prepare(0);
  for (size_t i = started; i < todo.size(); ++i) prepare(i);
  for (std::thread &t : threads) t.join();
  for (const std::exception_ptr &e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tilejit::runtime
