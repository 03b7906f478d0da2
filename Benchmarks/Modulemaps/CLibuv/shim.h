#ifndef RUNLOOPKIT_CLIBUV_SHIM_H
#define RUNLOOPKIT_CLIBUV_SHIM_H

// libuv 1.x from Debian's libuv1-dev, for the benchmark's C peer (Sources/CRawLibuv).
#include <uv.h>

#endif
