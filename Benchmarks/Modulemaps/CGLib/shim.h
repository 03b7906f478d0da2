#ifndef RUNLOOPKIT_CGLIB_SHIM_H
#define RUNLOOPKIT_CGLIB_SHIM_H

// GLib 2 from Debian's libglib2.0-dev, for the benchmark's C peer (Sources/CRawGLib).
#include <glib.h>
#include <glib-unix.h>

#endif
