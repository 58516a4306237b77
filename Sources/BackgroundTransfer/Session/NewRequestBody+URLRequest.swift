import Foundation
import FoundationNetworking
import TransferContainer

/// A request's body as a background download task sends it (its `httpBody`), or what it is
/// when the daemon cannot send it. A value; any thread.
extension NewRequestBody {
    init(of request: URLRequest) {
        if let body = request.httpBody {
            // Past the bound only the length travels: the refusal needs no more.
            self = body.count > TransferLimits.requestBodyBytes ? .tooLong(body.count) : .bytes(body)
        } else if request.httpBodyStream != nil {
            self = .stream
        } else {
            self = .absent
        }
    }
}
