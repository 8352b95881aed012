// A relaxed atomic 64-bit counter for SyncPrimitives' AtomicCounter, and one pointer per thread
// for its ThreadSlot.
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

/// A counter alone on its cache lines (128 bytes: a line and the one an adjacent-line prefetcher
/// pairs with it), for a value many threads read while another writes memory next to it.
static inline csp_counter *_Nonnull csp_counter_create_padded(uint64_t initial) {
  void *memory = NULL;
  if (posix_memalign(&memory, 128, 128) != 0 || memory == NULL) abort();
  csp_counter *counter = (csp_counter *)memory;
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

/// Adds one, for a counter only one thread ever writes (others only read it): a load and a
/// store, no read-modify-write.
static inline void csp_counter_increment_owned(csp_counter *_Nonnull counter) {
  uint64_t value = atomic_load_explicit(&counter->value, memory_order_relaxed);
  atomic_store_explicit(&counter->value, value + 1, memory_order_relaxed);
}

static inline uint64_t csp_counter_load(csp_counter *_Nonnull counter) {
  return atomic_load_explicit(&counter->value, memory_order_relaxed);
}

/// This thread's value of the one per-thread slot (NULL until set on this thread).
void *_Nullable csp_thread_slot_get(void);

/// Sets this thread's value; `release` is called with it when the thread exits (it must not be
/// NULL). Set once per thread: a second value replaces the first without releasing it.
void csp_thread_slot_set(void *_Nonnull value, void (*_Nonnull release)(void *_Nullable));

#endif
