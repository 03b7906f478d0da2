#include <event2/event.h>
#include <stdio.h>
int main(void) { printf("raw-httpd %s\n", event_get_version()); return 0; }
