import Testing

@Suite struct BenchSmokeTests {}
