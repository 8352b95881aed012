// The counter is inline in include/CSyncPrimitives.h; the thread slot is here, because a
// thread-local variable must be defined in one translation unit.
#include "CSyncPrimitives.h"

#include <pthread.h>

// Read on every access: a compiler-supported thread-local variable, a few instructions.
static _Thread_local void *csp_thread_value = NULL;

// Only so that a thread's value is released when the thread exits.
static pthread_key_t csp_thread_key;
static pthread_once_t csp_thread_key_once = PTHREAD_ONCE_INIT;
typedef void (*csp_release_function)(void *);
static _Atomic(csp_release_function) csp_thread_release = NULL;

static void csp_thread_exited(void *value) {
  // Cleared first: code that runs in a later thread-exit destructor and reads the slot finds
  // nothing (and may set a new value, which pthreads destroys in its next round), never the
  // released object.
  csp_thread_value = NULL;
  csp_release_function release = atomic_load_explicit(&csp_thread_release, memory_order_acquire);
  if (value != NULL && release != NULL) release(value);
}

static void csp_thread_key_create(void) {
  if (pthread_key_create(&csp_thread_key, csp_thread_exited) != 0) abort();
}

void *csp_thread_slot_get(void) { return csp_thread_value; }

void csp_thread_slot_set(void *value, void (*release)(void *)) {
  pthread_once(&csp_thread_key_once, csp_thread_key_create);
  // Every caller passes the same function; the first store wins and later ones are equal.
  atomic_store_explicit(&csp_thread_release, release, memory_order_release);
  csp_thread_value = value;
  if (pthread_setspecific(csp_thread_key, value) != 0) abort();
}
