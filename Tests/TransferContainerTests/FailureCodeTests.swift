import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TransferContainer

/// The codes the daemon records are Apple's numbers for the same errors: an app compares
/// `(error as NSError).code` or `URLError.Code` with those, never with our names.
@Suite struct FailureCodeTests {
    @Test("Every TransferFailure code is Apple's number for the same error")
    func codesAreApples() {
        // URLError.Code's raw values, not the NSURLError… constants: on Linux, FoundationNetworking's
        // constants from NSURLErrorSecureConnectionFailed to NSURLErrorClientCertificateRequired
        // are one below Apple's (-1201 for -1200, and so on), while URLError.Code has Apple's.
        let pairs: [(ours: Int, apples: URLError.Code)] = [
            (TransferFailure.cancelled, .cancelled),
            (TransferFailure.badURL, .badURL),
            (TransferFailure.timedOut, .timedOut),
            (TransferFailure.unsupportedURL, .unsupportedURL),
            (TransferFailure.cannotConnectToHost, .cannotConnectToHost),
            (TransferFailure.networkConnectionLost, .networkConnectionLost),
            (TransferFailure.fileDoesNotExist, .fileDoesNotExist),
            (TransferFailure.fileIsDirectory, .fileIsDirectory),
            (TransferFailure.noPermissionsToReadFile, .noPermissionsToReadFile),
            (TransferFailure.dataLengthExceedsMaximum, .dataLengthExceedsMaximum),
            (TransferFailure.cannotDecodeContentData, .cannotDecodeContentData),
            (TransferFailure.cannotCreateFile, .cannotCreateFile),
            (TransferFailure.cannotOpenFile, .cannotOpenFile),
            (TransferFailure.cannotWriteToFile, .cannotWriteToFile),
            (TransferFailure.backgroundSessionRequiresSharedContainer, .backgroundSessionRequiresSharedContainer),
            (TransferFailure.backgroundSessionInUseByAnotherProcess, .backgroundSessionInUseByAnotherProcess),
            (TransferFailure.backgroundSessionWasDisconnected, .backgroundSessionWasDisconnected),
            (TransferFailure.unknown, .unknown),
            (TransferFailure.badServerResponse, .badServerResponse),
            (TransferFailure.secureConnectionFailed, .secureConnectionFailed),
            (TransferFailure.serverCertificateHasBadDate, .serverCertificateHasBadDate),
            (TransferFailure.serverCertificateUntrusted, .serverCertificateUntrusted),
            (TransferFailure.serverCertificateHasUnknownRoot, .serverCertificateHasUnknownRoot),
            (TransferFailure.serverCertificateNotYetValid, .serverCertificateNotYetValid),
            (TransferFailure.clientCertificateRejected, .clientCertificateRejected),
            (TransferFailure.clientCertificateRequired, .clientCertificateRequired),
        ]
        for pair in pairs {
            #expect(pair.ours == pair.apples.rawValue, "\(pair.apples): ours \(pair.ours), Apple's \(pair.apples.rawValue)")
        }
    }
}
