// glibc's allocator settings, which Glibc's Swift module does not expose (malloc.h).
#ifndef CPOSIX_MEMORY_H
#define CPOSIX_MEMORY_H

/// Serves every allocation of `bytes` or more with its own mapping, given back to the system
/// when freed (mallopt M_MMAP_THRESHOLD). By default glibc raises that threshold after such a
/// block is freed, so the next big ones come from the heap, which keeps its pages: a process
/// that once held a few large requests stays that big. Returns 1 on success, 0 otherwise.
int cposix_map_large_allocations(int bytes);

/// Asks the processor to start loading the cache line at `address` (GCC's
/// `__builtin_prefetch`, which Swift cannot call): a pass over many records scattered in the
/// heap asks for the next ones while it works on this one, instead of waiting for each.
static inline void cposix_prefetch(const void *address) {
    __builtin_prefetch(address);
}
#endif
