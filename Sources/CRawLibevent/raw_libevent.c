#include <event2/event.h>
#include "raw_libevent.h"

int raw_libevent_version_ok(void) { return event_get_version_number() >= 0x02010000; }
