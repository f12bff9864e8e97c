// A bounded cache of traced kernels (or other per-mod results) keyed by the identities of the user's mods.
// Users create mods freely (a new ScoreMod per call is natural code); an unbounded map kept every one's
// traced kernel (~85 KB each) for the life of the process. Entries are shared_ptrs, so a kernel evicted
// while a launch or a tuning still uses it lives until that caller lets go. Internal to kernels/flex/.
#pragma once
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "tilejit/kernel.h"

namespace tilejit::attention::flex {

template <class Key, class Value = KernelBase>
class KernelLru {
 public:
  explicit KernelLru(size_t capacity) : capacity_(capacity) {}

  /// The entry for key, made with make() on a miss; the least recently used entry beyond the capacity is
  /// dropped. Thread-safe (make() runs under the lock).
  std::shared_ptr<Value> get(const Key &key, const std::function<std::shared_ptr<Value>()> &make) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);  // most recent first
      return it->second->second;
    }
    order_.emplace_front(key, make());
    index_[key] = order_.begin();
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_.size();
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<Value>>;
  size_t capacity_;
  std::mutex mu_;
  std::list<Entry> order_;
  std::map<Key, typename std::list<Entry>::iterator> index_;
};

}  // namespace tilejit::attention::flex
