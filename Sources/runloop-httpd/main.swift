print("runloop-httpd")
