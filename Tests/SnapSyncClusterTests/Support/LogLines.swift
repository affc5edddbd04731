import SnapSyncTestSupport

/// Every line a room log logged (SnapSyncTestSupport's `LogCapture`).
typealias LogLines = LogCapture
