// Everything is inline in include/CSyncPrimitives.h; a C target needs one source file.
#include "CSyncPrimitives.h"
