// The on-disk compile cache (DESIGN.md, "Cache"): a compiled graph survives the process.
//
// Directory: LT_CACHE_DIR, default ~/.cache/lazytensor; LT_CACHE_DIR=off disables it. One file
// per entry, <32 hex digits>.ltc, named by a hash of (graph key, backend, backend target), holding
//   header:  magic "LTCACHE\0", u32 format version, u32 0, u64 payload length, u64 payload
//            checksum, library version string, full key string
//   payload: u64 prim node count, the serialized Plan (lowering/plan_serialize.h), the backend's
//            bytes (Backend::serialize: object code, cubins, ...)
// A truncated, corrupted, foreign-version or wrong-key entry is a miss (one warning line under
// LT_DEBUG) that the runtime rebuilds and rewrites. Writes go to a temp file in the same
// directory and are renamed into place, so readers never see half an entry and concurrent
// writers of one key are safe. A directory that cannot be created or written disables writing
// for this process; reading goes on.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "ir/hash.h"

namespace lt {

struct DiskCacheInfo {
  bool enabled = false;
  std::string dir;      // where entries live (empty when disabled)
  int64_t entries = 0;  // our entry files
  int64_t bytes = 0;    // their total size
};

// The cache directory from LT_CACHE_DIR / HOME, read at each call; empty when disabled.
std::string disk_cache_dir();
DiskCacheInfo cache_info();
// Removes this library's entry files (and stale temp files) from the directory, nothing else;
// returns how many entries were removed.
int64_t cache_clear();

namespace disk_cache {

struct Loaded {
  Plan plan;  // without the prim graph
  int64_t nodes = 0;
  std::unique_ptr<Executable> exe;
};

// The entry for `key` on `backend`, or nullopt (disabled, absent, unusable, not cacheable).
std::optional<Loaded> load(Backend& backend, const Hash128& key);
// Writes the entry for `key`; returns whether it was written. Never throws.
bool store(Backend& backend, const Hash128& key, const Plan& plan, int64_t nodes,
           const Executable& exe);

}  // namespace disk_cache
}  // namespace lt
