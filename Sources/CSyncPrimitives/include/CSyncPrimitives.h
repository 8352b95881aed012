// A relaxed atomic 64-bit counter for SyncPrimitives' AtomicCounter.
//
// C11 atomics, because the Synchronization module's Atomic needs macOS 15 / iOS 18 and this
// package supports older systems. Swift cannot name an _Atomic field, so the counter is an
// opaque pointer and every access goes through these inline functions.
#ifndef CSYNCPRIMITIVES_H
#define CSYNCPRIMITIVES_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct csp_counter csp_counter;

struct csp_counter {
  _Atomic(uint64_t) value;
};

static inline csp_counter *_Nonnull csp_counter_create(uint64_t initial) {
  csp_counter *counter = (csp_counter *)malloc(sizeof(csp_counter));
  if (counter == NULL) abort();
  atomic_init(&counter->value, initial);
  return counter;
}

static inline void csp_counter_destroy(csp_counter *_Nonnull counter) { free(counter); }

/// Adds one and returns the new value.
static inline uint64_t csp_counter_increment(csp_counter *_Nonnull counter) {
  return atomic_fetch_add_explicit(&counter->value, 1, memory_order_relaxed) + 1;
}

/// Adds `amount` and returns the new value.
static inline uint64_t csp_counter_add(csp_counter *_Nonnull counter, uint64_t amount) {
  return atomic_fetch_add_explicit(&counter->value, amount, memory_order_relaxed) + amount;
}

static inline uint64_t csp_counter_load(csp_counter *_Nonnull counter) {
  return atomic_load_explicit(&counter->value, memory_order_relaxed);
}

#endif
