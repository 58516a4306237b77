internal import CCurl
#if canImport(Glibc)
internal import Glibc
#endif

/// Header bytes as text: UTF-8 when valid, otherwise ISO-8859-1 (HTTP's historical charset),
/// so no byte is ever lost or replaced.
func decodeHeaderLine(_ bytes: UnsafeRawBufferPointer) -> String {
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
}

/// Runs curl_global_init once per process, before the first easy or multi handle is made.
/// (Swift runs a global's initializer exactly once, thread-safely.)
func ensureCurlGlobalInit() throws(CurlError) {
    guard curlGlobalInitCode == CURLE_OK.rawValue else {
        throw CurlError(transferCode: curlGlobalInitCode)
    }
}

private let curlGlobalInitCode: UInt32 = curl_global_init(CCURL_GLOBAL_ALL).rawValue

// MARK: - C trampolines
// libcurl calls these with the CurlEasy as an unretained pointer (set in init). The object is
// alive whenever libcurl can call back: a CurlMulti retains the handles it holds, and
// resume()/pause() run on the object itself. They never throw or unwind into C.

func curlWriteTrampoline(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.deliverBody(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size * count))
}

func curlHeaderTrampoline(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let total = data == nil ? 0 : size * count
    guard let context else { return total }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.deliverHeader(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
}

func curlReadTrampoline(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return CCURL_READFUNC_ABORT }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.readUpload(into: UnsafeMutableRawBufferPointer(start: buffer, count: buffer == nil ? 0 : size * count))
}

func curlSeekTrampoline(
    _ context: UnsafeMutableRawPointer?, _ offset: curl_off_t, _ origin: Int32
) -> Int32 {
    guard let context, origin == SEEK_SET else { return CCURL_SEEKFUNC_CANTSEEK }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.seekUpload(to: Int64(offset))
}

func curlProgressTrampoline(
    _ context: UnsafeMutableRawPointer?, _ downloadTotal: curl_off_t, _ downloaded: curl_off_t,
    _ uploadTotal: curl_off_t, _ uploaded: curl_off_t
) -> Int32 {
    guard let context else { return 0 }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.reportProgress(downloaded: Int64(downloaded), downloadTotal: Int64(downloadTotal),
                               uploaded: Int64(uploaded), uploadTotal: Int64(uploadTotal))
}
