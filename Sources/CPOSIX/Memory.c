#include "Memory.h"
#include <malloc.h>

int cposix_map_large_allocations(int bytes) {
    // Setting it also fixes the trim threshold, which glibc would otherwise raise with it.
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
