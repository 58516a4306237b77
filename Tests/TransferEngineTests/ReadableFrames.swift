#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferContainer
import TransferPOSIX

/// The frames the client's end of a socket pair can read now, without waiting, as a client
/// of the daemon would read them. `decoder` keeps a frame cut between two reads.
func readableFrames(from peer: FileDescriptor, decoder: inout FrameDecoder) throws -> [DaemonFrame] {
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(peer.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard n > 0 else { break }
        buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }
    var frames: [DaemonFrame] = []
    while let body = try decoder.next() { frames.append(try Frame.decode(DaemonFrame.self, from: body)) }
    return frames
}
