import Foundation

/// Medians, percentiles and latency curves.
enum Stats {
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The `quantile` (0...1) of ascending `sorted` values, nearest rank.
    static func percentile(sorted: [Double], _ quantile: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((quantile * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// `numerator / denominator`, or nil when either is missing or the quotient is meaningless.
    static func ratio(_ numerator: Double?, _ denominator: Double?) -> Double? {
        guard let numerator, let denominator, numerator.isFinite, denominator.isFinite, denominator != 0 else {
            return nil
        }
        return numerator / denominator
    }

    /// The quantiles of a latency curve: 0 %, then 1 − 10^(−k/10) for k = 1 … 40 (up to 99.99 %),
    /// evenly spaced on the chart's log axis of 1 / (1 − q), and the median itself.
    static let curveQuantiles: [Double] = ((1...40).map { 1 - pow(10, -Double($0) / 10) } + [0, 0.5]).sorted()

    /// Position of a quantile on the chart's x axis: log10(1 / (1 − q)).
    static func curvePosition(_ quantile: Double) -> Double {
        quantile >= 1 ? 4 : -log10(1 - quantile)
    }

    /// The latency curve of `values` (any order).
    static func curve(_ values: [Double]) -> [Double] {
        let sorted = values.sorted()
        return curveQuantiles.map { percentile(sorted: sorted, $0) }
    }

    /// p50, p99 and max of `values` (any order).
    static func summary(_ values: [Double]) -> (p50: Double, p99: Double, max: Double) {
        let sorted = values.sorted()
        return (percentile(sorted: sorted, 0.5), percentile(sorted: sorted, 0.99), sorted.last ?? .nan)
    }
}
