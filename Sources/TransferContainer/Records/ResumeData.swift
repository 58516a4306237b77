import Foundation

/// Resume data, as `cancel(byProducingResumeData:)` hands it to the app and
/// `downloadTask(withResumeData:)` / `uploadTask(withResumeData:)` take it back: a property
/// list with Apple's keys (S6.3), plus our format marker and the file it stands for (the
/// partial download, or the upload's body). Opaque to the app.
///
/// Single-use: the daemon moves the file into the task that resumes it, so the same blob
/// used again finds no file and is refused as stale.
public struct ResumeData: Sendable, Equatable {
    public static let format = "com.example.BackgroundTransfer.resume-data"
    public static let currentVersion = 1

    public var url: String
    public var bytesReceived: Int64
    public var expectedTotalBytes: Int64
    public var entityTag: String?
    public var lastModified: String?
    /// The partial file, inside the container: relative to its root when the daemon made the
    /// resume data (`ContainerLayout.recordPath`), absolute from a default session.
    public var partialFile: String
    public var requestHeaders: [HeaderField]
    /// `.upload`: resume data of an upload, with `upload` set and `partialFile` its body.
    public var kind: TaskKind = .download
    public var httpMethod = "GET"
    /// Where the server keeps the upload (S6.6).
    public var upload: UploadResumption?

    public init(url: String, bytesReceived: Int64, expectedTotalBytes: Int64, entityTag: String?, lastModified: String?, partialFile: String, requestHeaders: [HeaderField]) {
        self.url = url
        self.bytesReceived = bytesReceived
        self.expectedTotalBytes = expectedTotalBytes
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.partialFile = partialFile
        self.requestHeaders = requestHeaders
    }

    /// Resume data of an upload the server keeps at `upload.location`; `bodyFile` is the
    /// daemon's copy of what is being sent.
    public init(upload: UploadResumption, url: String, httpMethod: String, bytesSent: Int64, totalBytes: Int64, bodyFile: String, requestHeaders: [HeaderField]) {
        self.init(url: url, bytesReceived: bytesSent, expectedTotalBytes: totalBytes, entityTag: nil, lastModified: nil, partialFile: bodyFile, requestHeaders: requestHeaders)
        self.kind = .upload
        self.httpMethod = httpMethod
        self.upload = upload
    }

    public var validator: Validator { Validator(entityTag: entityTag, lastModified: lastModified) }

    public func encoded() -> Data {
        var plist: [String: Any] = [
            "BackgroundTransferResumeFormat": Self.format,
            "NSURLSessionResumeInfoVersion": Self.currentVersion,
            "NSURLSessionDownloadURL": url,
            "NSURLSessionResumeBytesReceived": bytesReceived,
            "NSURLSessionResumeExpectedTotalBytes": expectedTotalBytes,
            "BackgroundTransferPartialFile": partialFile,
            "BackgroundTransferRequestHeaders": requestHeaders.map { [$0.name, $0.value] },
        ]
        if let entityTag { plist["NSURLSessionResumeEntityTag"] = entityTag }
        if let lastModified { plist["NSURLSessionResumeServerDownloadDate"] = lastModified }
        if let upload {
            plist["BackgroundTransferTaskKind"] = TaskKind.upload.rawValue
            plist["BackgroundTransferHTTPMethod"] = httpMethod
            plist["BackgroundTransferUploadLocation"] = upload.location
            plist["BackgroundTransferUploadInteropVersion"] = upload.interopVersion
        }
        return (try? PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)) ?? Data()
    }

    /// Reads resume data; throws a clear error for foreign or corrupted data.
    public init(decoding data: Data) throws(ResumeDataError) {
        let object: Any
        do { object = try PropertyListSerialization.propertyList(from: data, options: [], format: nil) } catch {
            throw .corrupted("not a property list (\(data.count) bytes)")
        }
        guard let plist = object as? [String: Any] else { throw .corrupted("not a dictionary") }
        guard plist["BackgroundTransferResumeFormat"] as? String == Self.format else {
            throw .foreign("not resume data produced by BackgroundTransfer (no \(Self.format) marker)")
        }
        guard let version = plist["NSURLSessionResumeInfoVersion"] as? Int, version == Self.currentVersion else {
            throw .foreign("resume data version \(plist["NSURLSessionResumeInfoVersion"].map { "\($0)" } ?? "none") is not supported (this version reads \(Self.currentVersion))")
        }
        guard let url = plist["NSURLSessionDownloadURL"] as? String,
              let bytes = (plist["NSURLSessionResumeBytesReceived"] as? NSNumber)?.int64Value, (0...CheckedNumbers.byteCounts.upperBound).contains(bytes),
              let partial = plist["BackgroundTransferPartialFile"] as? String else {
            throw .corrupted("a required key is missing or has the wrong type")
        }
        self.url = url
        self.bytesReceived = bytes
        self.expectedTotalBytes = CheckedNumbers.clamp((plist["NSURLSessionResumeExpectedTotalBytes"] as? NSNumber)?.int64Value ?? -1, to: CheckedNumbers.byteCounts)
        self.entityTag = plist["NSURLSessionResumeEntityTag"] as? String
        self.lastModified = plist["NSURLSessionResumeServerDownloadDate"] as? String
        self.partialFile = partial
        self.requestHeaders = ((plist["BackgroundTransferRequestHeaders"] as? [[String]]) ?? []).compactMap { pair in
            pair.count == 2 ? HeaderField(name: pair[0], value: pair[1]) : nil
        }
        if plist["BackgroundTransferTaskKind"] as? String == TaskKind.upload.rawValue {
            guard let location = plist["BackgroundTransferUploadLocation"] as? String,
                  let version = (plist["BackgroundTransferUploadInteropVersion"] as? NSNumber)?.intValue,
                  UploadResumption.supportedVersions.contains(version) else {
                throw .corrupted("upload resume data without a usable upload location and interop version")
            }
            self.kind = .upload
            self.httpMethod = plist["BackgroundTransferHTTPMethod"] as? String ?? "PUT"
            self.upload = UploadResumption(location: location, interopVersion: version)
            return
        }
        guard entityTag != nil || lastModified != nil else { throw .corrupted("no validator (ETag or Last-Modified)") }
    }
}

/// Resume data that cannot be used.
public enum ResumeDataError: Error, CustomStringConvertible, Sendable, Equatable {
    case corrupted(String)
    case foreign(String)
    case stale(String)

    public var description: String {
        switch self {
        case .corrupted(let why): "corrupted resume data: \(why)"
        case .foreign(let why): "foreign resume data: \(why)"
        case .stale(let why): "stale resume data: \(why)"
        }
    }
}
