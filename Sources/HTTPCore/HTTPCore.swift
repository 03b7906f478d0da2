/// HTTP/1.1 request parsing and response writing, independent of any event loop.
public enum HTTPCore {}
