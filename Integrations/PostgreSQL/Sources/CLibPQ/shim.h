// libpq's client API, from the system (Debian: libpq-dev; pkg-config libpq).
#include <libpq-fe.h>
