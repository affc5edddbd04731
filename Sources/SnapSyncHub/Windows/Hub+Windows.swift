import SnapSyncModel
import SnapSyncWire

extension Hub {
    func setWindow(requestID: UInt64, roomName: String, window: [SectionWindow], from session: Session) {
        send(Rejection(.windowTooLarge, "windows are not served yet").message(requestID: requestID), to: session)
    }
}
