import Testing

@Suite struct HTTPDPlaceholderTests {}
