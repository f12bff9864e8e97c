// prepare_concurrently (runtime/prepare_concurrently.h).
#include "runtime/prepare_concurrently.h"

#include <exception>
#include <thread>
#include <vector>

namespace tilejit::runtime {

void prepare_concurrently(std::span<KernelBase *const> kernels, const LaunchConfig &cfg,
                          std::span<const detail::ArgValue> args) {
  std::vector<KernelBase *> todo;
  for (KernelBase *k : kernels)
    if (!k->prepared(cfg, args)) todo.push_back(k);
  if (todo.empty()) return;
  std::vector<std::exception_ptr> errors(todo.size());
  auto prepare = [&](size_t i) {
    try {
      todo[i]->prepare(cfg, args);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < todo.size(); ++i) threads.emplace_back(prepare, i);
  prepare(0);
  for (std::thread &t : threads) t.join();
  for (const std::exception_ptr &e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tilejit::runtime
